"""`growth-autoscaler`: start and steer the NodeAutoscaler of one cluster.

    growth-autoscaler [--config growth.yaml] [--cluster NAME] start [--scan-interval 10] ...
                                              (one flag per AutoscalerSettings field; start --help)
    growth-autoscaler status [--json]
    growth-autoscaler pause | resume
    growth-autoscaler cancel-request ID          (full workflow id, or the part after request/)
    growth-autoscaler ban-pool GROUP/POOL | unban-pool GROUP/POOL
    growth-autoscaler protect-node NODE | unprotect-node NODE | remove-node NODE
    growth-autoscaler explain pod NAMESPACE/NAME [--json]   (which request it waits for, or why none)
    growth-autoscaler explain node NAME [--json]            (why it is kept, or when it goes)

Connects to Temporal exactly as the worker does (the same settings file: address, namespace,
task queue, mTLS files, API key environment variable), so one file configures both; `explain`
also reads the pod or node from the cluster with the file's kubeconfig for --cluster. `start`
takes its defaults from the file's `autoscaler:` section (or GROWTH_AUTOSCALER__<FIELD>), then
the flags given.
Exit codes: 0 done, 1 no such autoscaler, pod or node, or Temporal/the cluster unreachable,
2 refused by the workflow.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from pydantic import ValidationError
from temporalio.client import (
    Client,
    RPCError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCStatusCode

from activities.kube.client import api_client
from activities.settings import Settings, SettingsError, load_settings
from activities.updates import execute_update, query
from scaling.kube.pods import counts_as_demand, pod_info
from scaling.nodes.demand import demand_key
from scaling.nodes.explain import (
    ExplainNodeInput,
    ExplainPodInput,
    NodeExplanation,
    PodExplanation,
    RequestRef,
)
from scaling.nodes.models import LABEL_GROUP
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from scaling.nodes.status import AutoscalerStatus
from starters.settings_flags import add_model_flags, flag_for, given
from worker import connect
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id
from workflows.search import CLUSTER

RPC_TIMEOUT = timedelta(seconds=30)

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
    "use_search_attributes": "set Growth* search attributes (register them on the namespace first, see README)",
    "iterations_per_run": "loops per run before continue-as-new",
    "scale_down_enabled": "remove nodes growth added once they are not needed",
    "max_scale_down_per_loop": "most scale-downs started in one loop",
    "pdb_retry_s": "seconds a drain retries evictions a PodDisruptionBudget refuses",
    "eviction_retry_s": "seconds between eviction retries",
    "drain_timeout_s": "seconds evicted pods have to be gone",
    "orphan_grace_s": "seconds before a node without a machine (or the reverse) is reported",
}


class CliError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="growth-autoscaler", description="start and steer a cluster's NodeAutoscaler")
    p.add_argument("--config", help="worker settings YAML (default: $GROWTH_CONFIG; Temporal connection only)")
    p.add_argument(
        "--cluster",
        default=os.environ.get("GROWTH_CLUSTER", "default"),
        help="cluster name; the workflow id is nodes/<cluster> (default: $GROWTH_CLUSTER or 'default')",
    )
    sub = p.add_subparsers(dest="command", required=True)

    start = sub.add_parser(
        "start",
        help="start the NodeAutoscaler workflow (no-op if it runs already)",
        description="Start nodes/<cluster>. Every AutoscalerSettings field is a flag; a flag not given "
        "takes the settings file's autoscaler: value, else the default shown.",
    )
    add_model_flags(start, AutoscalerSettings, skip=frozenset({"cluster"}), aliases=START_ALIASES, help_text=START_HELP)

    status = sub.add_parser("status", help="print the autoscaler's status")
    status.add_argument("--json", action="store_true", help="the full status as JSON")
    sub.add_parser("pause", help="stop planning new nodes (in-flight requests continue)")
    sub.add_parser("resume", help="plan again, starting with a loop right away")
    cancel = sub.add_parser("cancel-request", help="cancel an in-flight NodeRequest")
    cancel.add_argument("id", help="NodeRequest workflow id, or its last part (000003-ab12)")
    ban = sub.add_parser("ban-pool", help="stop planning onto GROUP/POOL until unbanned")
    ban.add_argument("group_pool", metavar="GROUP/POOL")
    unban = sub.add_parser("unban-pool", help="allow GROUP/POOL again")
    unban.add_argument("group_pool", metavar="GROUP/POOL")
    for name, text in (
        ("protect-node", "never scale NODE down (cancels a removal still waiting on its timer)"),
        ("unprotect-node", "let scale-down consider NODE again"),
        ("remove-node", "remove a growth node now (refused when that would lose data)"),
    ):
        sub.add_parser(name, help=text).add_argument("node")
    explain = sub.add_parser(
        "explain",
        help="why a pod waits (which node group, pool and NodeRequest, or why none) or why a node stays",
        description="Reads the pod or node from the cluster (the settings' kubeconfig for --cluster), "
        "then asks the NodeAutoscaler with a query.",
    )
    explain.add_argument("kind", choices=["pod", "node"])
    explain.add_argument("name", help="NAMESPACE/NAME of a pod (NAME alone: namespace default), or a node's name")
    explain.add_argument("--json", action="store_true", help="the explanation as JSON")
    return p.parse_args(argv)


def request_workflow_id(cluster: str, given: str) -> str:
    """Accept the full workflow id or the short suffix the status table shows."""
    return given if "/" in given else f"{autoscaler_id(cluster)}/request/{given}"


async def start(client: Client, settings: Settings, args: argparse.Namespace) -> str:
    auto = start_settings(settings, args)
    wf_id = autoscaler_id(args.cluster)
    try:
        handle = await client.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(settings=auto),
            id=wf_id,
            task_queue=settings.temporal.task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(CLUSTER, args.cluster)])
            if auto.use_search_attributes
            else None,
        )
    except WorkflowAlreadyStartedError:
        return f"NodeAutoscaler {wf_id} is already running (settings unchanged; terminate it to change them)"
    return f"started NodeAutoscaler {wf_id} (run {handle.result_run_id}) on task queue {settings.temporal.task_queue}"


def start_settings(settings: Settings, args: argparse.Namespace) -> AutoscalerSettings:
    """Defaults < the settings' `autoscaler:` section < the flags given; errors name the field."""
    fields = AutoscalerSettings.model_fields
    unknown = sorted(set(settings.autoscaler) - set(fields))
    if unknown:
        raise CliError(f"settings: autoscaler.{unknown[0]}: not an AutoscalerSettings field", 2)
    flags = given(args, list(fields))
    try:
        return AutoscalerSettings.model_validate({**settings.autoscaler, **flags, "cluster": args.cluster})
    except ValidationError as err:
        e = err.errors()[0]
        name = str(e["loc"][0]) if e["loc"] else ""
        where = flag_for(name) if name in flags else f"settings autoscaler.{name}"
        raise CliError(f"{where}: {e['msg']}", 2) from None


def _when(ts: float | datetime | None) -> str:
    if ts is None:
        return "-"
    dt = ts if isinstance(ts, datetime) else datetime.fromtimestamp(ts, UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


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
        lines.append(_request_line(e.recent) + f"  at {_when(e.recent.finished_at)}")
    if e.key:
        lines.append(f"shape {e.key}: {e.shape_pending} pod(s) pending in the last loop ({_when(e.last_loop_at)})")
    lines.extend(f"note: {n}" for n in e.notes)
    return "\n".join(lines)


def format_node_explanation(e: NodeExplanation) -> str:
    lines = [f"node {e.node}: {e.outcome}", f"  {e.summary}"]
    c = e.candidate
    if c is not None:
        where = f" group {c.group} pool {c.pool}," if c.group else ""
        lines.append(f"last evaluation:{where} state {c.state}, utilization {c.utilization:.0%}")
    if e.unneeded_since is not None:
        lines.append(f"unneeded since {_when(e.unneeded_since)}")
    if e.removable_at is not None:
        lines.append(f"removal at {_when(e.removable_at)}")
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
            f"last loop {_when(ll.at)}: {ll.unschedulable} unschedulable pods, {ll.fits_existing} fit existing nodes, "
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
        lines.append("backing off: " + ", ".join(f"{k} until {_when(v)}" for k, v in sorted(backing_off.items())))
    if s.scale_downs:
        lines.append("scale-down in progress:")
        lines.extend(
            f"  {d.node}  {d.kind}  {d.phase.value}  at {_when(d.scale_down_at) if d.scale_down_at else '-'}"
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


async def run_command(client: Client, settings: Settings, args: argparse.Namespace) -> str:
    if args.command == "start":
        return await start(client, settings, args)
    wf_id = autoscaler_id(args.cluster)
    handle: WorkflowHandle = client.get_workflow_handle_for(NodeAutoscalerWorkflow.run, wf_id)  # type: ignore[arg-type]
    if args.command == "status":
        status: AutoscalerStatus = await query(handle, NodeAutoscalerWorkflow.status, rpc_timeout=RPC_TIMEOUT)
        return status.model_dump_json(indent=2) if args.json else format_status(status)
    if args.command == "pause":
        await handle.signal(NodeAutoscalerWorkflow.pause, rpc_timeout=RPC_TIMEOUT)
        return f"pause sent to {wf_id}"
    if args.command == "resume":
        await handle.signal(NodeAutoscalerWorkflow.resume, rpc_timeout=RPC_TIMEOUT)
        return f"resume sent to {wf_id}"
    if args.command == "cancel-request":
        return await execute_update(
            handle,
            NodeAutoscalerWorkflow.cancel_request,
            request_workflow_id(args.cluster, args.id),
            rpc_timeout=RPC_TIMEOUT,
        )
    if args.command in ("ban-pool", "unban-pool"):
        update = NodeAutoscalerWorkflow.ban_pool if args.command == "ban-pool" else NodeAutoscalerWorkflow.unban_pool
        banned = await execute_update(handle, update, args.group_pool, rpc_timeout=RPC_TIMEOUT)
        return f"banned pools of {wf_id}: {', '.join(banned) or 'none'}"
    if args.command in ("protect-node", "unprotect-node"):
        update = (
            NodeAutoscalerWorkflow.protect_node
            if args.command == "protect-node"
            else NodeAutoscalerWorkflow.unprotect_node
        )
        protected = await execute_update(handle, update, args.node, rpc_timeout=RPC_TIMEOUT)
        return f"protected nodes of {wf_id}: {', '.join(protected) or 'none'}"
    if args.command == "remove-node":
        return await execute_update(handle, NodeAutoscalerWorkflow.remove_node, args.node, rpc_timeout=RPC_TIMEOUT)
    if args.command == "explain":
        if args.kind == "pod":
            pod = await explain_pod(handle, settings, args)
            return pod.model_dump_json(indent=2) if args.json else format_pod_explanation(pod)
        node = await explain_node(handle, settings, args)
        return node.model_dump_json(indent=2) if args.json else format_node_explanation(node)
    raise CliError(f"unknown command {args.command}", 2)


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


async def explain_pod(handle: WorkflowHandle, settings: Settings, args: argparse.Namespace) -> PodExplanation:
    namespace, _, name = args.name.rpartition("/")
    namespace = namespace or "default"
    raw = await read_from_cluster(
        settings, args.cluster, f"pod {namespace}/{name}", "read_namespaced_pod", name, namespace
    )
    if raw is None:
        raise CliError(f"no pod {namespace}/{name} in cluster {args.cluster}")
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


async def explain_node(handle: WorkflowHandle, settings: Settings, args: argparse.Namespace) -> NodeExplanation:
    raw = await read_from_cluster(settings, args.cluster, f"node {args.name}", "read_node", args.name)
    if raw is None:
        raise CliError(f"no node {args.name} in cluster {args.cluster}")
    managed = LABEL_GROUP in ((raw.get("metadata") or {}).get("labels") or {})
    return await query(
        handle,
        NodeAutoscalerWorkflow.explain_node,
        ExplainNodeInput(name=args.name, managed=managed),
        rpc_timeout=RPC_TIMEOUT,
    )


def _cause(err: BaseException) -> str:
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err)


async def amain(args: argparse.Namespace) -> str:
    try:
        settings = load_settings(args.config)
    except SettingsError as err:  # names the field and the file
        raise CliError(str(err)) from None
    try:
        client = await connect(settings.temporal)
    except RuntimeError as err:  # the SDK raises RuntimeError when it cannot connect
        raise CliError(f"cannot connect to Temporal at {settings.temporal.address}: {err}") from None
    try:
        return await run_command(client, settings, args)
    except WorkflowUpdateFailedError as err:
        raise CliError(f"refused: {_cause(err)}", 2) from None
    except WorkflowQueryFailedError as err:
        raise CliError(f"query failed: {err}", 1) from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise CliError(
                f"no running NodeAutoscaler {autoscaler_id(args.cluster)} in namespace {settings.temporal.namespace}"
                f" (start it with: growth-autoscaler --cluster {args.cluster} start)"
            ) from None
        raise CliError(f"Temporal refused the call: {err}") from None


def run(argv: list[str] | None = None) -> int:
    """Run one command; prints its result (stdout) or the error (stderr); returns the exit code."""
    args = parse_args(argv)
    try:
        print(asyncio.run(amain(args)), flush=True)
    except CliError as err:
        print(f"growth-autoscaler: {err}", file=sys.stderr, flush=True)
        return err.code
    return 0


def main(argv: list[str] | None = None) -> None:
    code = run(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # The SDK's core runtime keeps native threads that can abort a normal interpreter shutdown
    # (measured: "PyGILState_Release ... finalizing", exit -6) after the output is written;
    # everything is flushed, so leave without finalizing.
    os._exit(code)


if __name__ == "__main__":
    main()
