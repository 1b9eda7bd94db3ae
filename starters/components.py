"""`growth components`: start and steer the ComponentAutoscaler of one TidbClusterAutoScaler
(old name: `growth-components`).

    growth components -n NAMESPACE NAME start [--planner growth|pd] [--scan-interval 30] ...
                                  (one option per ComponentAutoscalerSettings field)
    growth components -n NS NAME status     groups, replicas, intervals, errors, counters
    growth components -n NS NAME pause | resume
    growth components -n NS NAME pin --component tikv [--cluster auto-xxxx] REPLICAS
    growth components -n NS NAME unpin --component tikv [--cluster auto-xxxx]
    growth components -n NS NAME block-scale-in [--component tikv|tidb|*] | unblock-scale-in [...]
    growth components -n NS NAME trail [--component tikv]   (changes and their reasons, from the history)
    growth components -n NS NAME approvals | approve GROUP [--note T] | deny GROUP [--note T]

Settings, connection, output and exit codes are `starters.cli`'s. The workflow id is
components/<namespace>/<name>.
"""

from __future__ import annotations

import click
from temporalio.client import Client, WorkflowHandle

from activities.settings import Settings
from activities.updates import execute_update, query
from scaling.components.state import (
    AutoscalerReport,
    BlockScaleInRequest,
    ComponentAutoscalerInput,
    ComponentAutoscalerSettings,
    DecisionRequest,
    PinRequest,
)
from scaling.components.summaries import components_summary
from starters.approvals import PendingApproval, awaiting_query, format_approvals, list_awaiting
from starters.cli import (
    RPC_TIMEOUT,
    Call,
    Done,
    add_status_command,
    alias,
    require_served,
    shared_options,
    start_loop,
    workflow_call,
)
from starters.components_trail import trail_command
from starters.settings_flags import flag_for, given, model_options, validated
from workflows.components.autoscaler import ComponentAutoscalerWorkflow, workflow_id

FIXED = frozenset({"namespace", "name"})
START_HELP = {
    "approve_group_create": "a new heterogeneous group waits for `growth components approve` (growth's own gate)",
    "approval_timeout_s": "seconds a group's creation waits before its default applies",
    "approval_default": "what a waiting creation's timeout does",
    "kube_cluster": "which of the worker's clusters holds the objects (default: its kubernetes: connection)",
    "planner": "growth: growth's rules (use brought under the thresholds' midpoint); pd: ask PD's /autoscaling",
    "scan_interval_s": "seconds between rounds (intervals between changes come from the object's spec)",
    "iterations_per_run": "rounds per run before continue-as-new",
    "activity_timeout_s": "seconds one activity may take",
    "gone_rounds": "rounds the object must be missing before the loop ends",
    "use_search_attributes": "set GrowthCluster/GrowthPhase (register them on the namespace first)",
}


def start_settings(namespace: str, name: str, flags: dict) -> ComponentAutoscalerSettings:
    return validated(ComponentAutoscalerSettings, {**flags, "namespace": namespace, "name": name})


async def start(client: Client, settings: Settings, s: ComponentAutoscalerSettings) -> str:
    # Search attributes (when enabled) are set by the workflow once it has read its base cluster.
    _, text = await start_loop(
        client,
        settings,
        "ComponentAutoscaler",
        ComponentAutoscalerWorkflow.run,
        ComponentAutoscalerInput(settings=s),
        workflow_id(s.namespace, s.name),
        summary=components_summary(s),
    )
    return text


def format_report(r: AutoscalerReport) -> str:
    state = "PAUSED" if r.paused else "running"
    lines = [
        f"ComponentAutoscaler components/{r.namespace}/{r.name} ({r.planner} planner) for TidbCluster "
        f"{r.base_cluster or '?'}: {state}, {r.rounds} rounds, run {r.runs}",
        f"counters: {r.counters.homogeneous_scale_outs} homogeneous and {r.counters.storage_scale_outs} storage "
        f"scale-outs, {r.counters.heterogeneous_scale_outs} heterogeneous, {r.counters.scale_ins} scale-ins, "
        f"{r.counters.groups_deleted} groups deleted",
    ]
    for e in r.errors:
        lines.append(f"INVALID {e.field}: {e.message}")
    for component, cs in sorted(r.components.items()):
        last = cs.timing.last_change_at.isoformat() if cs.timing.last_change_at else "never"
        lines.append(f"{component}: homogeneous {cs.homogeneous_replicas}, last change {last}")
        for name, g in sorted(cs.groups.items()):
            lines.append(f"  {name:<18} {g.group:<36} {g.resource_type:<16} replicas {g.replicas} {g.phase}")
        if cs.deferred_until:
            waits = ", ".join(f"{c.cluster} {c.from_replicas}->{c.to_replicas}" for c in cs.deferred)
            lines.append(f"  waiting for the interval until {cs.deferred_until.isoformat()}: {waits}")
        if cs.headroom:
            lines.append(
                "  needs nodes for: "
                + ", ".join(f"{h.count} x {h.resource_type or 'homogeneous'}" for h in cs.headroom)
            )
        if cs.metrics_error:
            lines.append(f"  metrics: {cs.metrics_error}")
        lines.extend(f"  {n}" for n in cs.notes)
    ov = r.overrides
    if ov.pins or ov.block_scale_in:
        lines.append(f"overrides: pins {ov.pins or '-'}, scale-in blocked for {ov.block_scale_in or '-'}")
    if r.messages:
        lines.append("recent:")
        lines.extend(f"  {m}" for m in r.messages[-10:])
    return "\n".join(lines)


# -- the commands: each parses, then returns what it does once connected ----------------------

EXAMPLES = """\b
Examples:
  growth components -n tidb db-autoscaler start --planner pd --scan-interval 30
  growth components -n tidb db-autoscaler status -o yaml
  growth components -n tidb db-autoscaler pin --component tikv 5
  growth components -n tidb db-autoscaler block-scale-in --component tidb
"""


@click.group("components", epilog=EXAMPLES)
@click.option(
    "-n",
    "--namespace",
    envvar="GROWTH_COMPONENTS_NAMESPACE",
    default="default",
    show_default=True,
    help="the TidbClusterAutoScaler's namespace",
)
@click.argument("name")
@shared_options
@click.pass_context
def components(ctx: click.Context, namespace: str, name: str) -> None:
    """Start and steer a TidbClusterAutoScaler's loop (NAME: the TidbClusterAutoScaler)."""
    ctx.obj = (namespace, name)


def _call(where: tuple[str, str], run, table=str) -> Call:  # noqa: ANN001 - run: (handle, settings) -> answer
    wf_id = workflow_id(*where)
    namespace, name = where
    hint = f"no running ComponentAutoscaler {wf_id} (start it with: growth components -n {namespace} {name} start)"
    return workflow_call(wf_id, hint, run, table)


@components.command("start")
@model_options(ComponentAutoscalerSettings, skip=FIXED, help_text=START_HELP)
@shared_options
@click.pass_context
def start_command(ctx: click.Context, **_: object) -> Call:
    """Start components/<namespace>/<name> (no-op if it runs already)."""
    namespace, name = ctx.obj
    flags = given(ctx, [f for f in ComponentAutoscalerSettings.model_fields if f not in FIXED])

    async def run(client: Client, settings: Settings) -> Done:
        s = start_settings(namespace, name, flags)
        return Done(message=await start(client, settings, s), data={"workflow_id": workflow_id(namespace, name)})

    def check(settings: Settings) -> ComponentAutoscalerSettings:
        s = start_settings(namespace, name, flags)
        require_served(settings, s.kube_cluster, flag_for("kube_cluster"))
        return s

    return Call(run=run, check=check)


@components.command("approvals")
@shared_options
@click.pass_obj
def approvals_command(where: tuple[str, str]) -> Call:
    """Heterogeneous groups whose creation awaits approval, and what their timeout will do."""

    async def run(client: Client, settings: Settings) -> object:
        return await list_awaiting(client, awaiting_query(WorkflowId=workflow_id(*where)), _pending_groups)

    return Call(run=run, table=format_approvals)


async def _pending_groups(handle: WorkflowHandle) -> list[PendingApproval]:
    rep = await query(handle, ComponentAutoscalerWorkflow.status, rpc_timeout=RPC_TIMEOUT)
    return [
        PendingApproval(id=name, what=f"{component} group {name}", reason=wait.reason, deadline=wait.deadline,
                        default=wait.default)
        for component, cs in sorted(rep.components.items())
        for name, wait in sorted(cs.approvals.items())
        if not wait.decision
    ]  # fmt: skip


def _decision(name: str, approve: bool, text: str) -> None:
    @components.command(name, help=text)
    @click.argument("group")
    @click.option("--note", default="", help="why (kept in the loop's status)")
    @shared_options
    @click.pass_obj
    def command(where: tuple[str, str], group: str, note: str) -> Call:
        async def run(handle: WorkflowHandle, settings: Settings) -> Done:
            update = ComponentAutoscalerWorkflow.approve if approve else ComponentAutoscalerWorkflow.deny
            req = DecisionRequest(id=group, note=note)
            text = await execute_update(handle, update, req, rpc_timeout=RPC_TIMEOUT)
            return Done(message=text, data={"id": group, "decision": "approved" if approve else "denied"})

        return _call(where, run)


_decision("approve", True, "Create heterogeneous group GROUP (auto-<hash>) that awaits approval.")
_decision("deny", False, "Do not create GROUP; the plan may ask again after the approval timeout.")


add_status_command(
    components,
    _call,
    ComponentAutoscalerWorkflow.status,
    format_report,
    "Groups, replicas, intervals, errors, counters.",
)


def _pause(name: str, update, text: str) -> None:  # noqa: ANN001
    @components.command(name, help=text)
    @shared_options
    @click.pass_obj
    def command(where: tuple[str, str]) -> Call:
        async def run(handle: WorkflowHandle, settings: Settings) -> Done:
            await execute_update(handle, update, rpc_timeout=RPC_TIMEOUT)
            return Done(message=f"{handle.id} {name}d")

        return _call(where, run)


_pause("pause", ComponentAutoscalerWorkflow.pause, "Stop changing replicas (status is still written).")
_pause("resume", ComponentAutoscalerWorkflow.resume, "Scale again.")


def _pin(name: str, text: str) -> None:
    @components.command(name, help=text)
    @click.option("--component", required=True, type=click.Choice(["tikv", "tidb"]))
    @click.option("--cluster", default="", help="an auto-<hash> group (default: the base TidbCluster)")
    @shared_options
    @click.pass_obj
    def command(where: tuple[str, str], component: str, cluster: str, replicas: int | None = None) -> Call:
        async def run(handle: WorkflowHandle, settings: Settings) -> Done:
            req = PinRequest(component=component, cluster=cluster, replicas=replicas)
            pins = await execute_update(handle, ComponentAutoscalerWorkflow.pin_replicas, req, rpc_timeout=RPC_TIMEOUT)
            return Done(message=f"pins now: {pins or 'none'}", data={"pins": pins})

        return _call(where, run)

    if name == "pin":
        click.argument("replicas", type=click.IntRange(min=0))(command)


_pin("pin", "Hold a cluster's replicas at REPLICAS.")
_pin("unpin", "Let the autoscaler decide again.")


def _block(name: str, blocked: bool) -> None:
    @components.command(name, help=f"{name.split('-')[0].capitalize()} scale-in for a component (or all).")
    @click.option("--component", default="*", show_default=True, help="tikv, tidb or *")
    @shared_options
    @click.pass_obj
    def command(where: tuple[str, str], component: str) -> Call:
        async def run(handle: WorkflowHandle, settings: Settings) -> Done:
            req = BlockScaleInRequest(component=component, blocked=blocked)
            now = await execute_update(handle, ComponentAutoscalerWorkflow.block_scale_in, req, rpc_timeout=RPC_TIMEOUT)
            return Done(message=f"scale-in blocked for: {', '.join(now) or 'none'}", data={"block_scale_in": now})

        return _call(where, run)


_block("block-scale-in", True)
_block("unblock-scale-in", False)

components.add_command(trail_command)  # reads a history: its own module

main = alias("components", "growth-components")


if __name__ == "__main__":
    main()
