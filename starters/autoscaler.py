"""`growth nodes`: start and steer the NodeAutoscaler of one cluster (old name: `growth-autoscaler`).

    growth nodes [--cluster NAME] start [--scan-interval 10] ...
                                  (one option per AutoscalerSettings field; start --help)
    growth nodes status [-o json|yaml]
    growth nodes pause | resume
    growth nodes cancel-request ID          (full workflow id, or the part after request/)
    growth nodes request ID                 (a NodeRequest, a NodeRequestBatch, or a member: <batch>#<index>)
    growth nodes ban-pool GROUP/POOL | unban-pool GROUP/POOL
    growth nodes protect-node NODE | unprotect-node NODE | remove-node NODE
    growth nodes explain pod NAMESPACE/NAME   (which request it waits for, or why none)
    growth nodes explain node NAME            (why it is kept, or when it goes)
    growth nodes what-if [--node-groups F] [--max-nodes-total N] ...  (replay the recorded loops)
    growth nodes trail NODE                   (the node's decision trail, from the histories)
    growth nodes approvals | approve ID [--note T] | deny ID [--note T]   (approval gates)

Settings, connection, output and exit codes are `starters.cli`'s. `explain` also reads the pod or
node from the cluster with the settings' kubeconfig for --cluster. `start` takes its defaults from
the file's `autoscaler:` section (or GROWTH_AUTOSCALER__<FIELD>), then the options given.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import click
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from activities.kube.client import api_client
from activities.settings import Settings
from activities.updates import execute_update, query
from scaling.kube.pods import counts_as_demand, pod_info
from scaling.nodes.explain import (
    ExplainNodeInput,
    ExplainPodInput,
    NodeExplanation,
    PodExplanation,
    RequestRef,
    when,
)
from scaling.nodes.models import LABEL_GROUP
from scaling.nodes.scale_up.demand import demand_key
from scaling.nodes.scale_up.requests import split_request_id
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from scaling.nodes.status import AutoscalerStatus
from scaling.nodes.summaries import autoscaler_summary
from starters.approvals import PendingApproval, awaiting_query, decide, format_approvals, list_awaiting
from starters.cli import (
    RPC_TIMEOUT,
    Call,
    CliError,
    Done,
    add_signal_command,
    add_status_command,
    alias,
    require_served,
    shared_options,
    start_loop,
    workflow_call,
)
from starters.migrate_ca import migrate_from_ca
from starters.node_requests import (
    NODE_REQUEST_BATCH_WORKFLOW,
    RequestView,
    describe_batch,
    describe_request,
    format_request,
    read_request,
    request_workflow_id,
)
from starters.nodes_consolidate import consolidate_command
from starters.nodes_trail import trail_command
from starters.nodes_what_if import what_if_command
from starters.settings_flags import flag_for, given, model_options, validated
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id
from workflows.search import CLUSTER

# `start` flags: generated from AutoscalerSettings (a new field is a new flag). The names older
# scripts use stay as aliases; help for the fields the model does not describe itself.
START_ALIASES = {"max_nodes_total": ["--max-nodes"], "use_search_attributes": ["--search-attributes"]}
START_HELP = {
    "scan_interval_s": "seconds between loops",
    "max_nodes_total": "cluster-wide cap on nodes ('none': no cap)",
    "readiness_timeout_s": "seconds a new node has to become Ready",
    "readiness_poll_s": "seconds between readiness checks",
    "max_attempts": "pools a request tries before Unmet",
    "request_ttl_s": "seconds a finished request stays visible",
    "use_search_attributes": "set Growth* search attributes (register them on the namespace first, docs/operations.md)",
    "iterations_per_run": "loops per run before continue-as-new",
    "scale_down_enabled": "remove nodes growth added once they are not needed",
    "max_scale_down_per_loop": "most scale-downs started in one loop",
    "pdb_retry_s": "seconds a drain retries evictions a PodDisruptionBudget refuses",
    "eviction_retry_s": "seconds between eviction retries",
    "drain_timeout_s": "seconds evicted pods have to be gone",
    "orphan_grace_s": "seconds before a node without a machine (or the reverse) is reported",
}


async def start(client: Client, settings: Settings, cluster: str, flags: dict) -> str:
    auto = start_settings(settings, cluster, flags)
    attrs = TypedSearchAttributes([SearchAttributePair(CLUSTER, cluster)]) if auto.use_search_attributes else None
    _, text = await start_loop(
        client,
        settings,
        "NodeAutoscaler",
        NodeAutoscalerWorkflow.run,
        AutoscalerInput(settings=auto),
        autoscaler_id(cluster),
        summary=autoscaler_summary(auto),
        search_attributes=attrs,
    )
    return text


def start_settings(settings: Settings, cluster: str, flags: dict) -> AutoscalerSettings:
    """Defaults < the settings' `autoscaler:` section < the flags given; errors name the field."""
    fields = AutoscalerSettings.model_fields
    unknown = sorted(set(settings.autoscaler) - set(fields))
    if unknown:
        raise CliError(f"settings: autoscaler.{unknown[0]}: not an AutoscalerSettings field", 2)
    return validated(
        AutoscalerSettings,
        {**settings.autoscaler, **flags, "cluster": cluster},
        lambda name: flag_for(name) if name in flags else f"settings autoscaler.{name}",
    )


def _counts(d: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(d.items())) or "none"


def _request_line(r: RequestRef) -> str:
    node = f"  node {r.node_name}" if r.node_name else ""
    shape = f"  {r.pods_of_shape} pod(s) of its shape" if r.pods_of_shape else ""
    named = "  (names this pod)" if r.names_pod else ""
    return f"  {r.id}  group {r.group}  pool {r.pool}  {r.phase}{node}{shape}{named}"


def format_pod_explanation(e: PodExplanation) -> str:
    lines = [f"pod {e.namespace}/{e.name}: {e.outcome}", f"  {e.summary}"]
    if e.requests:
        lines.append("in-flight requests:")
        lines.extend(_request_line(r) for r in e.requests)
    if e.recent is not None and e.outcome != "RecentlyFinished":
        lines.append("last finished request for it or its shape:")
        lines.append(_request_line(e.recent) + f"  at {when(e.recent.finished_at)}")
    if e.key:
        lines.append(f"shape {e.key}: {e.shape_pending} pod(s) pending in the last loop ({when(e.last_loop_at)})")
    lines.extend(f"note: {n}" for n in e.notes)
    return "\n".join(lines)


def format_node_explanation(e: NodeExplanation) -> str:
    lines = [f"node {e.node}: {e.outcome}", f"  {e.summary}"]
    c = e.candidate
    if c is not None:
        where = f" group {c.group} pool {c.pool}," if c.group else ""
        lines.append(f"last evaluation:{where} state {c.state}, utilization {c.utilization:.0%}")
    if e.unneeded_since is not None:
        lines.append(f"unneeded since {when(e.unneeded_since)}")
    if e.removable_at is not None:
        lines.append(f"removal at {when(e.removable_at)}")
    if e.made_by is not None:
        lines.append(f"made by {e.made_by.id} (group {e.made_by.group}, pool {e.made_by.pool})")
    lines.extend(f"note: {n}" for n in e.notes)
    return "\n".join(lines)


def format_status(s: AutoscalerStatus) -> str:
    lines = [
        f"NodeAutoscaler {autoscaler_id(s.cluster)}: {'PAUSED' if s.paused else 'running'}, "
        f"{s.iterations} loops, run {s.runs}",
    ]
    ll = s.last_loop
    if ll.at is not None:
        lines.append(
            f"last loop {when(ll.at)}: {ll.unschedulable} unschedulable pods, {ll.fits_existing} fit existing nodes, "
            f"{ll.covered_in_flight} covered in flight, {ll.planned_nodes} nodes planned, {ll.problems} problems; "
            f"{ll.nodes} nodes, {ll.pods_running}/{ll.pods_total} pods running"
        )
    lines.append(f"requests: {_counts(s.requests_by_phase)}; nodes created: {s.nodes_created}")
    if s.in_flight:
        lines.append("in flight:")
        for r in s.in_flight:
            node = f" node {r.node_name}" if r.node_name else ""
            lines.append(f"  {r.id}  group {r.group}  pool {r.current_pool}  {r.phase.value}{node}")
    if s.attempts_by_pool:
        lines.append("attempts by pool:")
        lines.extend(f"  {pool}: {_counts(results)}" for pool, results in sorted(s.attempts_by_pool.items()))
    lines.append(f"banned pools: {', '.join(s.banned_pools) or 'none'}")
    now = datetime.now(UTC).timestamp()
    backing_off = {k: v for k, v in s.backoff_until.items() if v > now}
    if backing_off:
        lines.append("backing off: " + ", ".join(f"{k} until {when(v)}" for k, v in sorted(backing_off.items())))
    if s.scale_downs:
        lines.append("scale-down in progress:")
        lines.extend(
            f"  {d.node}  {d.kind}  {d.phase.value}  at {when(d.scale_down_at) if d.scale_down_at else '-'}"
            for d in s.scale_downs
        )
    if s.scale_down_by_phase:
        lines.append(f"scale-downs: {_counts(s.scale_down_by_phase)}")
    if s.protected_nodes:
        lines.append(f"protected nodes: {', '.join(s.protected_nodes)}")
    if s.never_satisfiable:
        lines.append(f"never satisfiable pods: {len(s.never_satisfiable)}")
        lines.extend(f"  {p.namespace}/{p.name}: {p.message}" for p in s.never_satisfiable[:10])
    if s.last_loop.headroom_problems:
        lines.append("headroom not planned:")
        lines.extend(f"  {p.name}: {p.reason}: {p.message}" for p in s.last_loop.headroom_problems)
    if s.invalid_groups:
        lines.append("invalid node groups:")
        lines.extend(f"  {g.name}: {g.field}: {g.message}" for g in s.invalid_groups)
    return "\n".join(lines)


# -- the commands: each parses, then returns what it does once connected ----------------------

EXAMPLES = """\b
Examples:
  growth nodes --cluster prod start --scan-interval 10 --max-nodes 40
  growth nodes --cluster prod status -o yaml
  growth nodes ban-pool general/hetzner-cx22
  growth nodes cancel-request 000003-ab12
  growth nodes request 000003-ab12#2
  growth nodes explain pod default/web-7f9c
  growth nodes approvals
  growth nodes approve 000007-c3d4 --note "planned migration"
"""


@click.group("nodes", epilog=EXAMPLES)
@click.option(
    "--cluster",
    envvar="GROWTH_CLUSTER",
    default="default",
    show_default=True,
    help="cluster name; the workflow id is nodes/<cluster> (env GROWTH_CLUSTER)",
)
@shared_options
@click.pass_context
def nodes(ctx: click.Context, cluster: str) -> None:
    """Start and steer a cluster's NodeAutoscaler."""
    ctx.obj = cluster


def _call(cluster: str, run, table=str) -> Call:  # noqa: ANN001 - run: (handle, settings) -> answer
    wf_id = autoscaler_id(cluster)
    hint = f"no running NodeAutoscaler {wf_id} (start it with: growth nodes --cluster {cluster} start)"
    return workflow_call(wf_id, hint, run, table)


@nodes.command(
    "start",
    epilog="Every AutoscalerSettings field is an option; an option not given takes the settings file's "
    "autoscaler: value, else the default shown.",
)
@model_options(AutoscalerSettings, skip=frozenset({"cluster"}), aliases=START_ALIASES, help_text=START_HELP)
@shared_options
@click.pass_context
def start_command(ctx: click.Context, **_: object) -> Call:
    """Start nodes/<cluster> (no-op if it runs already)."""
    cluster, flags = ctx.obj, given(ctx, list(AutoscalerSettings.model_fields))

    async def run(client: Client, settings: Settings) -> Done:
        return Done(message=await start(client, settings, cluster, flags), data={"workflow_id": autoscaler_id(cluster)})

    def check(settings: Settings) -> AutoscalerSettings:
        require_served(settings, cluster, "--cluster")
        return start_settings(settings, cluster, flags)

    return Call(run=run, check=check)


add_status_command(
    nodes,
    _call,
    NodeAutoscalerWorkflow.status,
    format_status,
    "Loops, requests in flight, attempts by pool, scale-downs, problems.",
)
add_signal_command(
    nodes, _call, "pause", NodeAutoscalerWorkflow.pause, "Stop planning new nodes (in-flight requests continue)."
)
add_signal_command(
    nodes, _call, "resume", NodeAutoscalerWorkflow.resume, "Plan again, starting with a loop right away."
)


@nodes.command("cancel-request")
@click.argument("request_id", metavar="ID")
@shared_options
@click.pass_obj
def cancel_request_command(cluster: str, request_id: str) -> Call:
    """Cancel an in-flight request: a NodeRequest, a whole NodeRequestBatch, or one batch member
    (000003-ab12#2); the workflow id or its last part (000003-ab12)."""

    async def run(handle: WorkflowHandle, settings: Settings) -> Done:
        wf_id = request_workflow_id(cluster, request_id)
        text = await execute_update(handle, NodeAutoscalerWorkflow.cancel_request, wf_id, rpc_timeout=RPC_TIMEOUT)
        return Done(message=text, data={"request": wf_id})

    return _call(cluster, run)


def _update_list(name: str, update, argument: str, what: str, text: str) -> None:  # noqa: ANN001
    @nodes.command(name, help=text)
    @click.argument("value", metavar=argument)
    @shared_options
    @click.pass_obj
    def command(cluster: str, value: str) -> Call:
        async def run(handle: WorkflowHandle, settings: Settings) -> Done:
            now = await execute_update(handle, update, value, rpc_timeout=RPC_TIMEOUT)
            return Done(
                message=f"{what} of {handle.id}: {', '.join(now) or 'none'}", data={what.replace(" ", "_"): now}
            )

        return _call(cluster, run)


_update_list(
    "ban-pool", NodeAutoscalerWorkflow.ban_pool, "GROUP/POOL", "banned pools", "Stop planning onto GROUP/POOL."
)
_update_list("unban-pool", NodeAutoscalerWorkflow.unban_pool, "GROUP/POOL", "banned pools", "Allow GROUP/POOL again.")
_update_list(
    "protect-node",
    NodeAutoscalerWorkflow.protect_node,
    "NODE",
    "protected nodes",
    "Never scale NODE down (cancels a removal still waiting on its timer).",
)
_update_list(
    "unprotect-node",
    NodeAutoscalerWorkflow.unprotect_node,
    "NODE",
    "protected nodes",
    "Let scale-down consider NODE again.",
)


@nodes.command("request")
@click.argument("request_id", metavar="ID")
@shared_options
@click.pass_obj
def request_command(cluster: str, request_id: str) -> Call:
    """A node request: a NodeRequest, a NodeRequestBatch with every member, or one member (ID#INDEX).

    ID is the workflow id or its last part (000003-ab12, 000003-ab12#2)."""

    async def run(client: Client, settings: Settings) -> RequestView:
        return await read_request(client, request_workflow_id(cluster, request_id))

    return Call(run=run, table=format_request)


@nodes.command("approvals")
@shared_options
@click.pass_obj
def approvals_command(cluster: str) -> Call:
    """NodeRequests and NodeRequestBatches awaiting approval (spec.approval): why, and what their
    timeout will do."""

    async def run(client: Client, settings: Settings) -> object:
        return await list_awaiting(client, awaiting_query(GrowthCluster=cluster), _pending_request)

    return Call(run=run, table=format_approvals)


async def _pending_request(handle: WorkflowHandle) -> list[PendingApproval]:
    """A request's wait, if still open; a batch's is one wait for every member."""
    kind = (await handle.describe(rpc_timeout=RPC_TIMEOUT)).workflow_type
    if kind == NODE_REQUEST_BATCH_WORKFLOW:
        batch = await describe_batch(handle)
        first = batch.members[0] if batch.members else None
        wait, group = batch.approval, batch.group
        what = (
            f"NodeRequestBatch {len(batch.members)} × {first.server_type if first else '?'} for group {group}, "
            f"pool {wait.step if wait else '?'} (one decision covers every member)"
        )
    else:
        status = await describe_request(handle)
        wait, group = status.approval, status.group
        what = f"NodeRequest {status.server_type} for group {group}, pool {wait.step if wait else '?'}"
    if wait is None or wait.decision:
        return []
    return [PendingApproval(id=handle.id, what=what, reason=wait.reason, deadline=wait.deadline, default=wait.default)]


def _decision(name: str, approve: bool, text: str) -> None:
    @nodes.command(name, help=text)
    @click.argument("request_id", metavar="ID")
    @click.option("--note", default="", help="why (kept in the request's status)")
    @shared_options
    @click.pass_obj
    def command(cluster: str, request_id: str, note: str) -> Call:
        async def run(client: Client, settings: Settings) -> Done:
            # A member's id names its batch: one decision covers every member.
            workflow_id, index = split_request_id(request_workflow_id(cluster, request_id))
            handle = client.get_workflow_handle(workflow_id)
            done = await decide(handle, name, note, approve)
            kind = (await handle.describe(rpc_timeout=RPC_TIMEOUT)).workflow_type
            if kind == NODE_REQUEST_BATCH_WORKFLOW:
                done.message += f" (the decision covers every member of batch {workflow_id})"
                done.data["batch"] = workflow_id
            return done

        return Call(run=run)


_decision(
    "approve",
    True,
    "Let a NodeRequest or NodeRequestBatch awaiting approval go ahead: its workflow id or last part, or a "
    "batch member's (ID#INDEX: approves the whole batch).",
)
_decision(
    "deny",
    False,
    "Refuse a NodeRequest or NodeRequestBatch awaiting approval (a member's id denies its whole batch): "
    "it ends Unmet (Denied), its pool backs off.",
)


@nodes.command("remove-node")
@click.argument("node")
@shared_options
@click.pass_obj
def remove_node_command(cluster: str, node: str) -> Call:
    """Remove a growth node now (refused when that would lose data)."""

    async def run(handle: WorkflowHandle, settings: Settings) -> Done:
        text = await execute_update(handle, NodeAutoscalerWorkflow.remove_node, node, rpc_timeout=RPC_TIMEOUT)
        return Done(message=text, data={"node": node})

    return _call(cluster, run)


@nodes.command(
    "explain",
    epilog="Reads the pod or node from the cluster (the settings' kubeconfig for --cluster), "
    "then asks the NodeAutoscaler with a query.",
)
@click.argument("kind", type=click.Choice(["pod", "node"]))
@click.argument("name")
@shared_options
@click.pass_obj
def explain_command(cluster: str, kind: str, name: str) -> Call:
    """Why a pod waits (group, pool and NodeRequest, or why none), or why a node stays.

    NAME is NAMESPACE/NAME of a pod (NAME alone: namespace default), or a node's name.
    """

    async def run(handle: WorkflowHandle, settings: Settings) -> PodExplanation | NodeExplanation:
        if kind == "pod":
            return await explain_pod(handle, settings, cluster, name)
        return await explain_node(handle, settings, cluster, name)

    def table(e: PodExplanation | NodeExplanation) -> str:
        return format_pod_explanation(e) if isinstance(e, PodExplanation) else format_node_explanation(e)

    return _call(cluster, run, table)


# -- explain: the pod or node from the cluster, then the autoscaler's query ------------------


async def read_from_cluster(settings: Settings, cluster: str, what: str, read: str, *args: str) -> dict | None:
    """One object as the API's JSON, or None when it does not exist (CliError when unreachable)."""
    kube = settings.kube_for(cluster)
    if kube is None:
        raise CliError(f"cluster {cluster!r} is not in the settings' clusters: cannot read {what}")

    def _read() -> dict | None:
        api = api_client(kube)
        try:
            resp = getattr(k8s.CoreV1Api(api), read)(*args, _preload_content=False, _request_timeout=30)
            return json.loads(resp.data)
        except ApiException as err:
            if err.status == 404:
                return None
            raise CliError(f"the cluster refused reading {what}: {err.status} {err.reason}") from None
        finally:
            api.close()

    try:
        return await asyncio.to_thread(_read)
    except CliError:
        raise
    except Exception as err:  # noqa: BLE001 - a bad kubeconfig or an unreachable API server
        raise CliError(f"cannot read {what} from cluster {cluster}: {err}") from None


async def explain_pod(handle: WorkflowHandle, settings: Settings, cluster: str, given_name: str) -> PodExplanation:
    namespace, _, name = given_name.rpartition("/")
    namespace = namespace or "default"
    raw = await read_from_cluster(settings, cluster, f"pod {namespace}/{name}", "read_namespaced_pod", name, namespace)
    if raw is None:
        raise CliError(f"no pod {namespace}/{name} in cluster {cluster}")
    pod = pod_info(raw)
    key = demand_key(pod)
    facts = {"namespace": namespace, "name": name, "uid": pod.uid, "key": key}
    # What the pod itself answers: the autoscaler is not asked about pods it never plans for.
    if pod.node_name:
        return PodExplanation(
            outcome="Scheduled", summary=f"pod {namespace}/{name} is scheduled on node {pod.node_name}", **facts
        )
    if not counts_as_demand(pod):
        kind = "a DaemonSet pod" if pod.is_daemonset else "a mirror (static) pod"
        return PodExplanation(
            outcome="NotDemand",
            summary=f"pod {namespace}/{name} is {kind}: it follows its node and never asks for a new one",
            **facts,
        )
    if pod.phase != "Pending":
        return PodExplanation(
            outcome="NotPending", summary=f"pod {namespace}/{name} is {pod.phase}, not waiting for a node", **facts
        )
    answer: PodExplanation = await query(
        handle, NodeAutoscalerWorkflow.explain_pod, ExplainPodInput(**facts), rpc_timeout=RPC_TIMEOUT
    )
    if pod.deletion_timestamp is not None:
        answer.notes.append("the pod is being deleted")
    elif not pod.unschedulable:
        answer.notes.append(
            "the scheduler has not marked the pod Unschedulable (yet): growth plans only for unschedulable pods"
        )
    return answer


async def explain_node(handle: WorkflowHandle, settings: Settings, cluster: str, name: str) -> NodeExplanation:
    raw = await read_from_cluster(settings, cluster, f"node {name}", "read_node", name)
    if raw is None:
        raise CliError(f"no node {name} in cluster {cluster}")
    managed = LABEL_GROUP in ((raw.get("metadata") or {}).get("labels") or {})
    return await query(
        handle,
        NodeAutoscalerWorkflow.explain_node,
        ExplainNodeInput(name=name, managed=managed),
        rpc_timeout=RPC_TIMEOUT,
    )


# Reads files only (no Temporal): the migration's own command, mounted here.
nodes.add_command(migrate_from_ca)
nodes.add_command(what_if_command)  # reads a history: its own module
what_if_command.add_command(consolidate_command)  # `what-if consolidate` reads the cluster now: its own module
nodes.add_command(trail_command)

main = alias("nodes", "growth-autoscaler")


if __name__ == "__main__":
    main()
