"""`make chaos` for node replacement (issue 32, item 6): a worker killed at each step of a
NodeReplacement (successor create, successor readiness, cordon, drain, delete of the old node).

The stack is the node burst's (bench/chaos_harness.py): 6 pods of 500m fill two cx22 nodes of a
KWOK pool. Then the group's labels change, which drifts both nodes (their pool hash no longer
matches); a budget of one Drifted node at a time replaces them one after another, each by one
successor (its pods fit no other node). Each fault strikes the first replacement at its step,
held there by a state the fault reads from the world: the API server holds the step's request
unanswered (a request hold of `/sim/v1/faults`: the successor's create, the old node's cordon
PATCH once its mark went through, the old node's DELETE), or the successor's readiness wait,
which lasts the sim's node-ready delay, is caught running, or the drain's first eviction is held
(a request hold too). The worker running that step is SIGKILLed
and replaced. One more schedule kills nothing: the sim's scheduler binds pods only every 8 s
(slow_scheduler), so the evicted pods wait unbound after their node is gone.

The Hetzner variant (node_replacement's `hetzner`) runs the same on the Hetzner demo's group
(CAX11 first, then CX31/CX32, CX33) and the fake Hetzner API: the worker is SIGKILLed while the
first successor's server create is in progress (the fake answers creates only after 5 s:
bench/chaos_hetzner.py's fault), and the servers are checked too (check_servers: no request with
a second server, none without a Node at the end, as many servers made as burst nodes and
successors). Its pools are billed by the second (`billing: {period: 0}`): billed per started
hour, Hetzner's default, a Drifted node waits, untainted, for the last 5 minutes of its paid hour.

The invariants are read from what the API server showed, never from the workflows' reports:
one watch on the nodes and one on the workload's pods from before the drift, merged in the
store's resourceVersion order (one counter over every resource), so every state the API server
held is seen, in order (replacement_violations):

- at every instant, each drifted node or one of its successors is Ready and schedulable (no
  cordon, no NoSchedule/NoExecute taint but Karpenter's karpenter.sh/disrupted, which a command
  puts on its nodes before it makes their successors: it keeps new pods off a node that keeps its
  own): the old node is marked and cordoned only once its successor serves, and never both are out
  of service;
- one successor per drifted node (nodes labelled growth.autoscaling.dev/replaces with its
  name), labelled with the request its replacement workflow keys the create with
  (`nodes/<cluster>/replace/<node>/node-<i>`), and no other node made after the drift;
- no pod still on a node when the API server deletes it (lost with the node);

and, at the end: every drifted node gone (no replacement stuck), every pod running, no pod
evicted twice, and the harness's history checks (no workflow failed, no non-determinism).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client
from temporalio.client import Client

from bench.chaos_harness import (
    CLUSTER,
    EVICTION,
    KWOK_POOLS,
    Fault,
    FaultRecord,
    Outcome,
    Pending,
    Stack,
    check_histories,
    held_create,
    held_request,
    kill_worker_during,
    node_burst,
    running_pods,
    settle,
    start_faults,
    start_node_loop,
    wait_for_activity,
)
from bench.chaos_hetzner import check_servers, kill_worker_during_create
from scaling.kube.labels import request_key
from scaling.nodes.contracts import (
    CORDON_NODE,
    CREATE_NODE,
    DELETE_NODE,
    EVICT_IN_ORDER,
    EVICT_POD,
    READINESS,
    TAINT_DISRUPTED,
)
from scaling.nodes.disruption.drift import LABEL_REPLACES
from scaling.nodes.disruption.orchestration import command_id, replacement_id, successor_id
from scaling.nodes.models import LABEL_REQUEST
from sim.kube.kubeconfig import Endpoint
from starters.kube import apply_node_group, deployment, node_group
from starters.scenarios.hetzner import POOLS as HETZNER_POOLS
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id

APP = "burst"
GIB = 1 << 30
# One Drifted node at a time (so each fault meets the first replacement at its step), and no
# wait after the burst's scale-up before the drift is acted on.
GROUP_SPEC: dict[str, Any] = {
    "scaleDown": {"delayAfterAdd": "1s"},
    "disruption": {"budgets": [{"nodes": "1", "reasons": ["Drifted"]}]},
}
# The Hetzner demo's pools billed by the second: billed per started hour (Hetzner's default), a
# Drifted node is kept, untainted, until 5 min before its paid hour ends (BillingPeriodNotEnding:
# the billing hold applies to every removal method, replacements included).
HETZNER_SPEC = GROUP_SPEC | {"pools": [p | {"billing": {"period": "0"}} for p in HETZNER_POOLS]}
DRIFT_LABELS = {"chaos.growth.autoscaling.dev/generation": "2"}  # in the pool hash: drifts every node
OUT_OF_SERVICE_EFFECTS = ("NoSchedule", "NoExecute")
# Karpenter's taint on a command's candidates from before their replacements launch: new pods stay
# off the node, the pods it runs stay on it (a taint, not a cordon or a drain). The node serves.
DISRUPTED = "karpenter.sh/disrupted"
FINISHED = ("Succeeded", "Failed")
SUCCESSORS_LOOKED_FOR = 8  # successor indexes a replacement's key may carry


# -- what the API server showed ----------------------------------------------------------------
@dataclass(frozen=True)
class NodeSeen:
    rv: int
    name: str
    gone: bool = False
    ready: bool = False
    schedulable: bool = False
    replaces: str = ""  # growth.autoscaling.dev/replaces
    request: str = ""  # growth.autoscaling.dev/request

    @property
    def serving(self) -> bool:
        return not self.gone and self.ready and self.schedulable


@dataclass(frozen=True)
class PodSeen:
    rv: int
    name: str  # namespace/name
    node: str = ""
    phase: str = "Pending"
    gone: bool = False


def node_seen(rv: int, obj: dict[str, Any], gone: bool = False) -> NodeSeen:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    labels = meta.get("labels") or {}
    return NodeSeen(
        rv=rv,
        name=meta.get("name", ""),
        gone=gone,
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []),
        schedulable=not spec.get("unschedulable")
        and not any(
            t.get("effect") in OUT_OF_SERVICE_EFFECTS and t.get("key") != DISRUPTED for t in spec.get("taints") or []
        ),
        replaces=labels.get(LABEL_REPLACES, ""),
        request=labels.get(LABEL_REQUEST, ""),
    )


def pod_seen(rv: int, obj: dict[str, Any], gone: bool = False) -> PodSeen:
    meta = obj.get("metadata") or {}
    return PodSeen(
        rv=rv,
        name=f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        node=(obj.get("spec") or {}).get("nodeName") or "",
        phase=(obj.get("status") or {}).get("phase") or "Pending",
        gone=gone,
    )


def successor_keys(cluster: str, node: str, runs: Iterable[str]) -> set[str]:
    """The request labels a successor of ``node`` may carry: the keys of its replacement's runs
    (a NodeReplacement never continues as new: each run is a command, its run id its first)."""
    wid = replacement_id(cluster, node)
    return {request_key(successor_id(command_id(wid, r), i)) for r in runs for i in range(SUCCESSORS_LOOKED_FOR)}


async def replacement_runs(temporal: Client, cluster: str, nodes: Iterable[str]) -> dict[str, set[str]]:
    """Each node's replacement runs, by run id, from the server's visibility."""
    runs: dict[str, set[str]] = {}
    for node in nodes:
        query = f"WorkflowId = '{replacement_id(cluster, node)}'"
        runs[node] = {w.run_id async for w in temporal.list_workflows(query)}
    return runs


def replacement_violations(
    seen: list[NodeSeen | PodSeen],
    drifted: set[str],
    cluster: str,
    runs: Mapping[str, Iterable[str]],
    successors_needed: bool = True,
) -> list[str]:
    """The replacement invariants over what the API server showed (module docstring), in its
    resourceVersion order; ``seen`` starts with the state before the drift (the lists' items);
    ``runs``: each drifted node's replacement runs (replacement_runs). ``successors_needed``: False
    when the drifted nodes' pods fit the nodes that stay (no successor: a node out of service is the
    plan, and any node made is one bought for a pod the drain stranded)."""
    nodes: dict[str, NodeSeen] = {}
    pods: dict[str, PodSeen] = {}
    listed = min((s.rv for s in seen if isinstance(s, NodeSeen)), default=0)  # the first list's
    before = {s.name for s in seen if isinstance(s, NodeSeen) and s.rv == listed}
    successors: dict[str, list[str]] = {n: [] for n in drifted}
    v: list[str] = []
    out_of_service: set[str] = set()  # drifted nodes already reported, once each
    ordered = sorted(seen, key=lambda s: s.rv)
    for i, s in enumerate(ordered):
        if isinstance(s, PodSeen):
            if s.gone:
                pods.pop(s.name, None)
            else:
                pods[s.name] = s
        elif s.gone:
            if s.name in drifted:
                lost = sorted(p.name for p in pods.values() if p.node == s.name and p.phase not in FINISHED)
                if lost:
                    v.append(f"pods {', '.join(lost)} still on node {s.name} when it was deleted")
            nodes.pop(s.name, None)
        else:
            if s.name not in nodes and s.name not in before:
                if s.replaces in successors:
                    if s.name not in successors[s.replaces]:
                        successors[s.replaces].append(s.name)
                    if s.request not in successor_keys(cluster, s.replaces, runs.get(s.replaces, ())):
                        v.append(f"successor {s.name} of {s.replaces} not keyed by its replacement: {s.request!r}")
                else:
                    v.append(f"node {s.name} made beside the replacements")
            nodes[s.name] = s
        if i + 1 < len(ordered) and ordered[i + 1].rv == s.rv:
            continue  # one state of the store: judged once all of it is in
        for old in sorted(drifted - out_of_service) if successors_needed else ():
            members = [m for m in (nodes.get(old), *(nodes.get(n) for n in successors[old])) if m is not None]
            if not any(m.serving for m in members):
                out_of_service.add(old)
                shown = ", ".join(
                    f"{m.name} ({'ready' if m.ready else 'not ready'}, {'schedulable' if m.schedulable else 'cordoned'})"
                    for m in members
                )
                v.append(
                    f"node {old} and its successors all out of service at resourceVersion {s.rv}: {shown or 'none'}"
                )
    v += [
        f"node {old} replaced by {len(made)} successors: {', '.join(made)}"
        for old, made in successors.items()
        if len(made) > 1
    ]
    return v


class Watcher:
    """The API server's nodes and the workload's pods, listed once and then watched: every state
    it held from the list on, tagged with its resourceVersion."""

    def __init__(self, kubeconfig: Path) -> None:
        self.endpoint = Endpoint.from_kubeconfig(kubeconfig)
        self.seen: list[NodeSeen | PodSeen] = []
        self.tasks: list[asyncio.Task] = []
        self.lost = ""  # why the watch could not go on (the states from then on unseen)

    async def start(self) -> None:
        async with self._http(httpx.Timeout(10)) as http:
            for path, params, make in self._resources():
                listed = (await http.get(path, params=params)).raise_for_status().json()
                rv = listed["metadata"]["resourceVersion"]
                self.seen += [make(int(rv), item, False) for item in listed["items"]]
                self.tasks.append(asyncio.create_task(self._watch(path, params, make, rv)))

    def _http(self, timeout: httpx.Timeout) -> httpx.AsyncClient:
        e = self.endpoint
        auth = {"Authorization": f"Bearer {e.token}"}
        return httpx.AsyncClient(base_url=e.url, verify=e.ssl_context(), headers=auth, timeout=timeout)

    def _resources(self) -> list[tuple[str, dict[str, str], Callable[[int, dict[str, Any], bool], NodeSeen | PodSeen]]]:
        return [
            ("/api/v1/nodes", {}, node_seen),
            ("/api/v1/namespaces/default/pods", {"labelSelector": f"app={APP}"}, pod_seen),
        ]

    async def _watch(
        self,
        path: str,
        params: dict[str, str],
        make: Callable[[int, dict[str, Any], bool], NodeSeen | PodSeen],
        rv: str,
    ) -> None:
        async with self._http(httpx.Timeout(10, read=None)) as http:
            while True:  # a watch the server ends is taken up again where it stopped
                query = {**params, "watch": "true", "resourceVersion": rv}
                async with http.stream("GET", path, params=query) as resp:
                    resp.raise_for_status()
                    async for line in resp.aiter_lines():
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        if event["type"] == "ERROR":  # 410 Gone: the store no longer has rv's events
                            self.lost = f"{path} watch ended: {event['object'].get('message', '')}"
                            return
                        if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                            continue
                        rv = event["object"]["metadata"]["resourceVersion"]
                        self.seen.append(make(int(rv), event["object"], event["type"] == "DELETED"))

    async def stop(self) -> list[NodeSeen | PodSeen]:
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        return self.seen


# -- the faults ----------------------------------------------------------------------------------
def in_replacement(p: Pending) -> bool:
    """An activity of a NodeReplacement or of the NodeScaleDown it drains the node with."""
    return p.workflow_id.startswith((f"nodes/{CLUSTER}/replace/", f"nodes/{CLUSTER}/scale-down/"))


async def strike(stack: Stack, rec: FaultRecord, snapshot: list[Pending], what: str) -> str | None:
    """SIGKILL the worker running snapshot[0]; its name (None, rec.skipped set, when none)."""
    name = stack.worker_by_pid(snapshot[0].worker_pid) if snapshot and snapshot[0].worker_pid else None
    if name is None:
        rec.skipped = f"{what} not seen running on a worker of ours"
        return None
    rec.stalled, rec.started = snapshot, time.time()
    stack.workers[name].stop(signal.SIGKILL, timeout=30)
    return name


def kill_worker_during_held(
    activity_type: str, method: str, path: Callable[[Stack], str], body_regex: str = ""
) -> Fault:
    """SIGKILL the worker whose `activity_type` sent the request the API server holds (the
    successor's create: found by its replacement's id, which the held node's labels name; a
    step on the old node: the replacement's drain, one at a time under the budget)."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        async with held_request(stack, method, path(stack), rec, body_regex=body_regex) as held:
            if not held:
                return
            replaces = held[0].get("labels", {}).get(LABEL_REPLACES)
            if activity_type == CREATE_NODE and replaces:
                snapshot = await held_create(temporal, replacement_id(CLUSTER, replaces), 60)
            else:
                snapshot = await wait_for_activity(temporal, activity_type, 60, match=in_replacement)
            name = await strike(stack, rec, snapshot, f"the held {activity_type}")
            if name is None:
                return
        rec.ended = time.time()  # the other worker is alive throughout
        await asyncio.to_thread(stack.replace_worker, name)

    return inject


def old_nodes(stack: Stack) -> str:
    """A path regex of the nodes to replace: growth's nodes that replace none (read as the fault
    begins, before the drift)."""
    nodes = client.CoreV1Api(stack.api).list_node(label_selector=LABEL_REQUEST).items
    names = sorted(n.metadata.name for n in nodes if LABEL_REPLACES not in (n.metadata.labels or {}))
    return rf"^/api/v1/nodes/({'|'.join(names)})$"


def slow_scheduler(interval_s: float = 8.0) -> Fault:
    """The sim's scheduler binds pending pods every ``interval_s`` from before the drift (as
    kube-scheduler's backoff does under load): each replacement's evicted pods are recreated and stay
    unbound for seconds after their node is deleted. A loop that evaluates then saw the successor
    empty and tainted it as an Empty node, and the next replacement counted it as room and bought no
    successor (growth on main did both, in 2 runs of 2)."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        async with httpx.AsyncClient(verify=False, timeout=10) as http:
            settings = {"scheduler_interval": interval_s}
            (await http.post(f"{stack.sim_url}/sim/v1/settings", json=settings)).raise_for_status()
        rec.started = rec.ended = time.time()  # a condition the whole run holds, not a moment

    return inject


REPLACEMENT_FAULTS: dict[str, Fault] = {
    "kill-worker-during-successor-create": kill_worker_during_held(
        CREATE_NODE, "POST", lambda stack: r"^/api/v1/nodes$"
    ),
    "kill-worker-during-successor-readiness": kill_worker_during(READINESS, match=in_replacement),
    # The old node's first PATCH is its karpenter.sh/disrupted taint, before the successor's create.
    "kill-worker-during-disrupted-taint": kill_worker_during_held(TAINT_DISRUPTED, "PATCH", old_nodes),
    # The cordon's PATCH by its body. Counting the old nodes' PATCHes (taint, mark, cordon) held the
    # mark once (30 Nov): the loop's soft taint on the other old node, unneeded, came between.
    "kill-worker-during-cordon": kill_worker_during_held(
        CORDON_NODE, "PATCH", old_nodes, body_regex=r'"unschedulable":true'
    ),
    "kill-worker-during-replacement-drain": kill_worker_during(EVICT_POD, hold=EVICTION, match=in_replacement),
    "kill-worker-during-old-node-delete": kill_worker_during_held(DELETE_NODE, "DELETE", old_nodes),
    "slow-scheduler": slow_scheduler(),
    # ordered_replacement's: the worker evicting its pods one at a time, between two of them.
    "kill-worker-during-ordered-evictions": kill_worker_during(EVICT_IN_ORDER, match=in_replacement),
    # The Hetzner variant: the successor's server create answered only after 5 s (the fake's).
    "kill-worker-during-successor-hetzner-create": kill_worker_during_create(match=in_replacement),
}


def drift_group(group: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The group with `spec` (the burst's: GROUP_SPEC...) and DRIFT_LABELS added to its labels:
    every node drifts."""
    labels = group["spec"].get("labels", {}) | DRIFT_LABELS
    return {**group, "spec": group["spec"] | spec | {"labels": labels}}


# -- the scenario --------------------------------------------------------------------------------
async def node_replacement(
    workdir: Path, names: list[str], pods: int = 6, timeout: float = 420, hetzner: bool = False
) -> Outcome:
    """The burst, then the drift and its replacements with the faults `names` beside them; checked.
    `hetzner`: on the Hetzner demo's group and fake Hetzner API (node_burst's), its servers
    checked too (check_servers)."""
    spec = HETZNER_SPEC if hetzner else GROUP_SPEC
    outcome, stack, temporal = await node_burst(workdir, [], pods, hetzner=hetzner, **spec)
    group = stack.hetzner.node_groups()[0] if stack.hetzner else node_group("general", KWOK_POOLS)
    try:
        if not outcome.violations:
            faults = [(n, REPLACEMENT_FAULTS[n]) for n in names]
            await _replace(stack, temporal, outcome, faults, timeout, drift_group(group, spec))
    finally:
        stack.stop()
    return outcome


# ordered_replacement's world: x (the group's cx32) holds an api and a cache; d and m, nodes of no
# group, have 2.1 GiB and 3.1 GiB free (tests/activities/nodes/test_evict_in_order.py's).
ORDERED_POOLS = [{"provider": "kwok", "serverType": ["cx32"], "priority": 10}]
ORDERED_PODS = (("api", "1", 2 * GIB), ("cache", "500m", 3 * GIB))
ORDERED_FREE = {"d": (2920, 2 * GIB + GIB // 10), "m": (3420, 3 * GIB + GIB // 10)}  # millicores, bytes


def part(name: str, cpu: str, memory: int) -> dict[str, Any]:
    """A one-replica Deployment whose pod is the workload's (app=APP) and its own (part=name)."""
    labels = {"app": APP, "part": name}
    body = deployment(name, 1, cpu, str(memory))
    body["spec"]["selector"]["matchLabels"] = labels
    body["spec"]["template"]["metadata"]["labels"] = labels
    return body


def add_held_node(core: client.CoreV1Api, name: str, free: tuple[int, int]) -> None:
    """A cx32-sized node outside every group, its room but ``free`` taken by a bare pod."""
    q = {"cpu": "3920m", "memory": str(6 * GIB), "pods": "110"}
    core.create_node(
        {
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "status": {"allocatable": q, "capacity": q, "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    cpu, mem = 3920 - free[0], 6 * GIB - free[1]
    requests = {"cpu": f"{cpu}m", "memory": str(mem)}
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": f"{name}-filler"},
            "spec": {
                "nodeName": name,
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": requests}}],
            },
        },
    )


async def ordered_replacement(workdir: Path, names: list[str], timeout: float = 300) -> Outcome:
    """The drift of a node whose pods the scheduler places only in one order: x's api, evicted
    first, would take m (the emptier) and strand the cache, for which a node would be bought. The
    plan names the order (cache, then api), and the NodeReplacement evicts them one at a time,
    each once the one before is bound again; no successor, no node bought, nothing evicted twice,
    with the faults ``names`` (a worker killed between two evictions) beside it."""
    stack = Stack(workdir)
    try:
        stack.start(["--node-ready-delay", "2"])
        temporal = await stack.client()
        group = node_group("general", ORDERED_POOLS, **GROUP_SPEC)
        apply_node_group(stack.api, group)
        handle = await start_node_loop(stack, temporal)
        began = time.monotonic()
        stack.replicas = len(ORDERED_PODS)
        apps = client.AppsV1Api(stack.api)
        for body in (part(*p) for p in ORDERED_PODS):
            apps.create_namespaced_deployment("default", body)
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        status = await settle(stack, handle, done, lambda s: not s.in_flight, timeout)
        outcome = Outcome("ordered-replacement", [], [], 0, time.monotonic() - began)
        core = client.CoreV1Api(stack.api)
        growth = [n.metadata.name for n in core.list_node(label_selector=LABEL_REQUEST).items]
        if status is None or len(growth) != 1:
            outcome.violations.append(f"the api and the cache not running on one node of the group: {growth}")
            return outcome
        for name, free in ORDERED_FREE.items():
            add_held_node(core, name, free)
        faults = [(n, REPLACEMENT_FAULTS[n]) for n in names]
        await _replace(stack, temporal, outcome, faults, timeout, drift_group(group, GROUP_SPEC), False)
        placed = {
            p.metadata.labels["part"]: p.spec.node_name
            for p in core.list_namespaced_pod("default", label_selector=f"app={APP}").items
        }
        if placed != {"cache": "m", "api": "d"}:
            outcome.violations.append(f"the pods ended on {placed}, not the cache on m and the api on d")
        return outcome
    finally:
        stack.stop()


async def _replace(
    stack: Stack,
    temporal: Client,
    outcome: Outcome,
    faults: list[tuple[str, Fault]],
    timeout: float,
    group: dict[str, Any],
    successors_needed: bool = True,
) -> None:
    began = time.monotonic()
    core = client.CoreV1Api(stack.api)
    drifted = {n.metadata.name for n in core.list_node(label_selector=LABEL_REQUEST).items}
    watcher = Watcher(stack.kubeconfig)
    await watcher.start()
    # The faults' holds go in long before what they hold: a loop scan, an evaluation and a plan
    # come between the drift and a replacement's first request (one that missed is a violation).
    records, faults_done = start_faults(stack, temporal, faults)
    apply_node_group(stack.api, group)
    handle = temporal.get_workflow_handle(autoscaler_id(CLUSTER))
    deadline = time.monotonic() + timeout
    done = False
    while time.monotonic() < deadline and not done:
        await asyncio.sleep(0.5)
        if not faults_done.done():
            continue
        faults_done.result()
        left = {n.metadata.name for n in (await asyncio.to_thread(core.list_node)).items}
        if drifted & left or running_pods(stack.api, APP)[0] != stack.replicas:
            continue
        status = await handle.query(NodeAutoscalerWorkflow.status)
        done = not status.scale_downs and not status.in_flight
    faults_done.cancel()
    seen = await watcher.stop()
    outcome.faults, outcome.seconds = records, time.monotonic() - began
    v = outcome.violations
    listed = core.list_node().items
    left = {n.metadata.name for n in listed}
    v += [f"replacement of {n} stuck: the node still there after {timeout:.0f} s" for n in sorted(drifted & left)]
    v += [
        f"node {n.metadata.name} still tainted {DISRUPTED} at the end"
        for n in listed
        if any(t.key == DISRUPTED for t in (n.spec.taints if n.spec else None) or [])
    ]
    running, total = running_pods(stack.api, APP)
    if running != stack.replicas:
        v.append(f"{running} of {stack.replicas} pods running ({total} in all) at the end")
    if watcher.lost:
        v.append(f"the API server's states not all seen: {watcher.lost}")
    runs = await replacement_runs(temporal, CLUSTER, drifted)
    v += replacement_violations(seen, drifted, CLUSTER, runs, successors_needed)
    evicted = await check_histories(temporal, stack.worker_logs(), outcome)
    v += [f"pod {pod} evicted {n} times" for pod, n in evicted.items() if n > 1]
    outcome.nodes_created = len({s.name for s in seen if isinstance(s, NodeSeen) and s.replaces in drifted})
    outcome.nodes_left = len(left)
    if stack.hetzner is not None:  # a server per burst node and per successor, none leaked
        created = await check_servers(stack, outcome, None, nodes_made=len(drifted) + outcome.nodes_created)
        outcome.created = {"nodes_created": outcome.nodes_created, "servers_created": created}
