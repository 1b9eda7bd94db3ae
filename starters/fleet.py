"""`growth fleet`: start and steer the FleetAutoscaler of one provider region (old name: `growth-fleet`).

    growth fleet [--provider aws] [--region us-east-1] start --fleet-config fleet.yaml
                                  [--scan-interval 30] ... (one option per FleetAutoscalerSettings field)
    growth fleet status               clusters with phase and capacity, instances, counters
    growth fleet create-instance ID --type standard --size x1
    growth fleet delete-instance ID
    growth fleet instance ID          where the instance is placed
    growth fleet approve-deletion CLUSTER | block-deletion CLUSTER
    growth fleet pause | resume
    growth fleet what-if --fleet-config F   (the recorded rounds under another configuration)
    growth fleet trail CLUSTER              (the cluster's decision trail, from the histories)
    growth fleet approvals | approve CLUSTER [--note T] | deny CLUSTER [--note T]   (approval gates)

Settings, connection, output and exit codes are `starters.cli`'s. The fleet configuration (seed
000's provider, dynamic-scaling, instance-type and prewarming sections) is validated before the
loop starts; errors name the field.
"""

from __future__ import annotations

import dataclasses

import click
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from activities.settings import Settings
from activities.updates import execute_update, query
from scaling.fleet.config import FleetConfigError, ManualCluster, load_fleet_config, load_manual_clusters
from scaling.fleet.contracts import (
    MAX_REGISTER_BATCH,
    ClusterRegistrations,
    CreateInstanceRequest,
    InstancePlacement,
    autoscaler_workflow_id,
    cluster_workflow_id,
)
from scaling.fleet.index import shard_of, shard_workflow_id
from scaling.fleet.models import ManagedInstance
from scaling.fleet.region import FleetAutoscalerInput, FleetAutoscalerSettings, RegionStatus
from scaling.fleet.summaries import region_summary
from starters.approvals import PendingApproval, awaiting_query, decide, format_approvals, list_awaiting
from starters.cli import (
    MISSING,
    REFUSED,
    RPC_TIMEOUT,
    Call,
    CliError,
    Done,
    add_signal_command,
    add_status_command,
    alias,
    shared_options,
    start_loop,
    workflow_call,
)
from starters.fleet_trail import trail_command
from starters.fleet_what_if import what_if_command
from starters.settings_flags import given, model_options, validated
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow, placement_of
from workflows.fleet.cluster import DataPlaneClusterWorkflow
from workflows.fleet.index import InstanceIndexWorkflow
from workflows.search import PROVIDER, REGION

START_ALIASES = {"scan_interval_s": ["--interval"]}  # the flag's name before scan_interval_s
START_HELP = {
    "scan_interval_s": "seconds between evaluations",
    "recheck_delay_s": "seconds between marking a cluster deprovisioning and its re-check",
    "deletion_requires_approval": "remove an empty cluster only after approve-deletion",
    "approve_cluster_create": "a new cluster waits for `growth fleet approve` before it is created at OCM",
    "approve_cluster_delete": "a removable cluster waits for `growth fleet approve` before it is deleted",
    "approval_timeout_s": "seconds a gated step waits before its default applies",
    "approval_default": "what a gated step's timeout does",
    "failure_backoff_s": "seconds without a new cluster of a type after one failed",
    "flap_window_s": "a scale-up this soon after a removal counts as a flap",
    "max_clusters": "most clusters the region's registry holds",
    "max_instances": "most instances the region holds (placed or waiting)",
    "max_waiting": "most instances queued for a cluster (the queue rides in the region's state)",
    "index_shards": "shard workflows of the instance index (fixed when a region first starts them)",
    "iterations_per_run": "evaluations per run before continue-as-new",
    "use_search_attributes": "set Growth* search attributes (register them on the namespace first)",
    "cluster_timeouts": "JSON: provisioning_s, step_s, agent_s, deletion_s, poll_s",
    "cluster_reports_per_run": "agent reports per cluster run before continue-as-new",
    "fleetshard_parameters": "JSON object: non-secret parameters of the fleetshard addon",
}


def start_settings(provider: str, region: str, flags: dict) -> FleetAutoscalerSettings:
    return validated(FleetAutoscalerSettings, {**flags, "provider": provider, "region": region})


def start_input(provider: str, region: str, fleet_config: str, flags: dict) -> FleetAutoscalerInput:
    """The loop's input from the fleet configuration file and the options; errors name the field."""
    try:
        config = load_fleet_config(fleet_config)
    except FleetConfigError as err:
        raise CliError(f"{fleet_config}: {err}", REFUSED) from None
    except OSError as err:
        raise CliError(f"--fleet-config: {err}", REFUSED) from None
    if config.region(provider, region) is None:
        raise CliError(f"{fleet_config}: supported_providers has no {provider}/{region}", REFUSED)
    return FleetAutoscalerInput(settings=start_settings(provider, region, flags), config=config)


async def start(client: Client, settings: Settings, provider: str, region: str, fleet_config: str, flags: dict) -> str:
    """Start the region's loop, then register the clusters the configuration lists for it: they
    go through `register_clusters` in batches, not in the loop's input (which is carried across
    continue-as-new and must not grow with the fleet). A region already running gets them too
    (known clusters are left as they are), so a start cut short between the two is finished by
    starting again."""
    inp = start_input(provider, region, fleet_config, flags)
    listed = inp.config.manual_clusters(provider, region)
    inp = inp.model_copy(update={"config": inp.config.without_clusters()})
    fleet = inp.settings
    wf_id = autoscaler_workflow_id(provider, region)
    attrs = None
    if fleet.use_search_attributes:
        attrs = TypedSearchAttributes([SearchAttributePair(PROVIDER, provider), SearchAttributePair(REGION, region)])
    handle, text = await start_loop(
        client,
        settings,
        "FleetAutoscaler",
        FleetAutoscalerWorkflow.run,
        inp,
        wf_id,
        summary=region_summary(fleet),
        search_attributes=attrs,
    )
    if listed:
        await register_listed(handle, listed)
        text += f"; {len(listed)} listed cluster(s) registered"
    return text


async def register_listed(handle: WorkflowHandle, clusters: list[ManualCluster]) -> list[str]:
    """Register `clusters` with `register_clusters`, MAX_REGISTER_BATCH at a time (each update's
    input is in the region's history); known clusters are left as they are."""
    ids: list[str] = []
    for k in range(0, len(clusters), MAX_REGISTER_BATCH):
        batch = ClusterRegistrations(clusters=clusters[k : k + MAX_REGISTER_BATCH])
        ids += await execute_update(handle, FleetAutoscalerWorkflow.register_clusters, batch, rpc_timeout=RPC_TIMEOUT)
    return ids


def format_status(s: RegionStatus) -> str:
    lines = [
        f"FleetAutoscaler fleet/{s.provider}/{s.region}: {'PAUSED' if s.paused else 'running'}, "
        f"{s.evaluations} evaluations, run {s.runs}",
        f"instances: {s.instances_placed} placed, {s.instances_waiting} waiting",
        f"clusters: {s.clusters_created} created, {s.clusters_deleted} deleted, {s.clusters_failed} failed, flaps {s.flaps}",
    ]
    if s.clusters:
        lines.append(f"  {'CLUSTER':<36} {'TYPE':<10} {'PHASE':<38} {'USED/MAX UNITS':>14}  INSTANCES")
        for c in s.clusters:
            flags = " blocked" if c.deletion_blocked else (" approved" if c.deletion_approved else "")
            flags += " registered" if c.manual else ""
            flags += " enterprise" if c.cluster_type == "enterprise" else ""
            flags += "" if c.schedulable else " unschedulable"
            for n, (itype, u) in enumerate(c.types.items()):
                units = f"{u.consumed_units}/{u.max_units if u.max_units is not None else '?'}"
                if n == 0:
                    row = f"  {c.id:<36} {itype:<10} {c.phase.value:<38} {units:>14}  {c.instances}{flags}"
                else:  # a cluster running several types: one line per further type
                    row = f"  {'':<36} {itype:<10} {'':<38} {units:>14}"
                lines.append(row)
    for t in s.last_evaluation:
        remove = f", remove {t.remove.cluster_id}" if t.remove else ""
        lines.append(
            f"{t.instance_type}: scale-up {'yes' if t.scale_up.needed else 'no'} ({t.scale_up.reason.value}), "
            f"free {t.scale_up.free_units}/{t.scale_up.total_units} units{remove}"
        )
    if s.awaiting_approval:
        lines.append(f"awaiting approval to remove: {', '.join(s.awaiting_approval)}")
    if s.events:
        lines.append("recent:")
        lines.extend(f"  {e}" for e in s.events[-10:])
    return "\n".join(lines)


def format_placement(p: InstancePlacement) -> str:
    where = f"placed on {p.cluster_id}" if p.cluster_id else "waiting for a ready cluster with room"
    return f"instance {p.id} ({p.instance_type} {p.size}, {p.units} units): {where}"


async def find_instance(client: Client, region_workflow_id: str, instance_id: str) -> InstancePlacement | None:
    """Where an instance is: the region answers for its queue and this run's answers, the
    instance's index shard for the rest (scaling.fleet.index)."""
    handle = client.get_workflow_handle(region_workflow_id)
    found: InstancePlacement | None = await query(handle, FleetAutoscalerWorkflow.instance, instance_id)
    if found is not None:
        return found
    st: RegionStatus = await query(handle, FleetAutoscalerWorkflow.status)
    if not st.index_shards:
        return None
    shard = client.get_workflow_handle(shard_workflow_id(region_workflow_id, shard_of(instance_id, st.index_shards)))
    try:
        rec: ManagedInstance | None = await query(shard, InstanceIndexWorkflow.instance, instance_id)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return None  # a shard starts with its first instance: none was ever sent there
    return placement_of(rec) if rec is not None else None


# -- the commands: each parses, then returns what it does once connected ----------------------

EXAMPLES = """\b
Examples:
  growth fleet --provider aws --region us-east-1 start --fleet-config fleet.yaml --scan-interval 30
  growth fleet status -o json
  growth fleet create-instance kafka-1 --type standard --size x1
  growth fleet approve-deletion us-east-1-standard-000002
  growth fleet approvals
  growth fleet approve us-east-1-standard-3-a1b2c3 --note "capacity for the sale"
"""


@click.group("fleet", epilog=EXAMPLES)
@click.option("--provider", envvar="GROWTH_FLEET_PROVIDER", default="aws", show_default=True, help="cloud provider")
@click.option("--region", envvar="GROWTH_FLEET_REGION", default="us-east-1", show_default=True, help="region")
@shared_options
@click.pass_context
def fleet(ctx: click.Context, provider: str, region: str) -> None:
    """Start and steer a provider region's FleetAutoscaler."""
    ctx.obj = (provider, region)


def _call(where: tuple[str, str], run, table=str) -> Call:  # noqa: ANN001 - run: (handle, settings) -> answer
    wf_id = autoscaler_workflow_id(*where)
    provider, region = where
    hint = (
        f"no running FleetAutoscaler {wf_id} (start it with: "
        f"growth fleet --provider {provider} --region {region} start --fleet-config ...)"
    )
    return workflow_call(wf_id, hint, run, table)


@fleet.command("start")
@click.option(
    "--fleet-config",
    required=True,
    type=click.Path(),
    help="fleet configuration YAML, or a kas-fleet-manager config directory (its four files, as they are)",
)
@model_options(
    FleetAutoscalerSettings, skip=frozenset({"provider", "region"}), aliases=START_ALIASES, help_text=START_HELP
)
@shared_options
@click.pass_context
def start_command(ctx: click.Context, fleet_config: str, **_: object) -> Call:
    """Start fleet/<provider>/<region> (no-op if it runs already)."""
    provider, region = ctx.obj
    flags = given(ctx, [f for f in FleetAutoscalerSettings.model_fields if f not in ("provider", "region")])

    async def run(client: Client, settings: Settings) -> Done:
        text = await start(client, settings, provider, region, fleet_config, flags)
        return Done(message=text, data={"workflow_id": autoscaler_workflow_id(provider, region)})

    return Call(run=run, check=lambda settings: start_input(provider, region, fleet_config, flags))


add_status_command(
    fleet,
    _call,
    FleetAutoscalerWorkflow.status,
    format_status,
    "Clusters with phase and capacity, instances, counters.",
)


@fleet.command("create-instance")
@click.argument("instance_id", metavar="ID")
@click.option("--type", "instance_type", required=True, help="instance type, e.g. standard")
@click.option("--size", required=True, help="size of the type, e.g. x1")
@shared_options
@click.pass_obj
def create_instance_command(where: tuple[str, str], instance_id: str, instance_type: str, size: str) -> Call:
    """Create a managed instance (placed, or waiting for a cluster)."""

    async def run(handle: WorkflowHandle, settings: Settings) -> InstancePlacement:
        req = CreateInstanceRequest(id=instance_id, instance_type=instance_type, size=size)
        return await execute_update(handle, FleetAutoscalerWorkflow.create_instance, req, rpc_timeout=RPC_TIMEOUT)

    return _call(where, run, format_placement)


@fleet.command("instance")
@click.argument("instance_id", metavar="ID")
@shared_options
@click.pass_obj
def instance_command(where: tuple[str, str], instance_id: str) -> Call:
    """Where a managed instance is placed (or that it waits for a cluster)."""

    wf_id = autoscaler_workflow_id(*where)

    async def run(client: Client, settings: Settings) -> InstancePlacement:
        found = await find_instance(client, wf_id, instance_id)
        if found is None:
            raise CliError(f"no instance {instance_id} in {wf_id}", MISSING)
        return found

    return dataclasses.replace(_call(where, lambda handle, settings: None, format_placement), run=run)


@fleet.command("register-clusters")
@click.argument("cluster_file", metavar="FILE", type=click.Path(exists=True, dir_okay=False))
@shared_options
@click.pass_obj
def register_clusters_command(where: tuple[str, str], cluster_file: str) -> Call:
    """Register the region's clusters listed in FILE (kas-fleet-manager's
    dataplane-cluster-configuration.yaml): existing clusters, never created at OCM."""
    provider, region = where

    def listed() -> list[ManualCluster]:
        try:
            clusters = load_manual_clusters(cluster_file)
        except FleetConfigError as err:
            raise CliError(f"refused: {err}", REFUSED) from None
        return [c for c in clusters if (c.cloud_provider, c.region) == (provider, region)]

    async def run(handle: WorkflowHandle, settings: Settings) -> Done:
        ids = await register_listed(handle, listed())
        return Done(
            message=f"registered {len(ids)} cluster(s) in {provider}/{region}: {', '.join(ids)}", data={"clusters": ids}
        )

    return dataclasses.replace(_call(where, run), check=lambda settings: listed())


@fleet.command("delete-instance")
@click.argument("instance_id", metavar="ID")
@shared_options
@click.pass_obj
def delete_instance_command(where: tuple[str, str], instance_id: str) -> Call:
    """Delete a managed instance."""

    async def run(handle: WorkflowHandle, settings: Settings) -> Done:
        gone = await execute_update(
            handle, FleetAutoscalerWorkflow.delete_instance, instance_id, rpc_timeout=RPC_TIMEOUT
        )
        if not gone:
            raise CliError(f"no instance {instance_id} in {handle.id}", REFUSED)
        return Done(message=f"instance {instance_id} deleted", data={"instance": instance_id})

    return _call(where, run)


def _deletion(name: str, update, done: str, text: str) -> None:  # noqa: ANN001
    @fleet.command(name, help=text)
    @click.argument("cluster")
    @shared_options
    @click.pass_obj
    def command(where: tuple[str, str], cluster: str) -> Call:
        async def run(handle: WorkflowHandle, settings: Settings) -> Done:
            await execute_update(handle, update, cluster, rpc_timeout=RPC_TIMEOUT)
            return Done(message=f"deletion of {cluster} {done}", data={"cluster": cluster, "deletion": done})

        return _call(where, run)


_deletion(
    "approve-deletion", FleetAutoscalerWorkflow.approve_deletion, "approved", "Allow removing CLUSTER once empty."
)
_deletion(
    "block-deletion",
    FleetAutoscalerWorkflow.block_deletion,
    "blocked",
    "Never remove CLUSTER (calls off a removal not yet confirmed).",
)


@fleet.command("approvals")
@shared_options
@click.pass_obj
def approvals_command(where: tuple[str, str]) -> Call:
    """Data-plane clusters whose creation or deletion awaits approval, and what their timeout will do."""
    provider, region = where

    async def run(client: Client, settings: Settings) -> object:
        return await list_awaiting(
            client, awaiting_query(GrowthProvider=provider, GrowthRegion=region), _pending_cluster
        )

    return Call(run=run, table=format_approvals)


async def _pending_cluster(handle: WorkflowHandle) -> list[PendingApproval]:
    st = await query(handle, DataPlaneClusterWorkflow.status, rpc_timeout=RPC_TIMEOUT)
    wait = st.approval
    if wait is None or wait.decision:
        return []
    what = f"DataPlaneCluster {st.cluster_id} ({st.instance_type}): {wait.step}"
    return [
        PendingApproval(id=st.cluster_id, what=what, reason=wait.reason, deadline=wait.deadline, default=wait.default)
    ]


def _decision(name: str, approve: bool, text: str) -> None:
    @fleet.command(name, help=text)
    @click.argument("cluster")
    @click.option("--note", default="", help="why (kept in the cluster's status)")
    @shared_options
    @click.pass_obj
    def command(where: tuple[str, str], cluster: str, note: str) -> Call:
        async def run(client: Client, settings: Settings) -> Done:
            wf_id = cluster if cluster.startswith("fleet/cluster/") else cluster_workflow_id(cluster)
            update = DataPlaneClusterWorkflow.approve if approve else DataPlaneClusterWorkflow.deny
            return await decide(client.get_workflow_handle(wf_id), update, note, approve)

        return Call(run=run)


_decision("approve", True, "Let CLUSTER's creation or deletion that awaits approval go ahead.")
_decision("deny", False, "Refuse it: a creation ends the cluster failed, a denied deletion blocks its deletion.")


add_signal_command(
    fleet, _call, "pause", FleetAutoscalerWorkflow.pause, "Stop creating and removing clusters (placement goes on)."
)
add_signal_command(fleet, _call, "resume", FleetAutoscalerWorkflow.resume, "Evaluate again.")

fleet.add_command(what_if_command)  # reads a history: its own module
fleet.add_command(trail_command)

main = alias("fleet", "growth-fleet")


if __name__ == "__main__":
    main()
