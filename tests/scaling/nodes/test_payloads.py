"""What crosses history does not grow with the cluster: a 30,000-pending-pod, 5,000-node
burst, measured with the data converter the worker uses."""

import functools
from datetime import UTC, datetime, timedelta

from temporalio.contrib.pydantic import pydantic_data_converter

from scaling.kube.models import LABEL_HOSTNAME, LABEL_INSTANCE_TYPE, NodeInfo, PodInfo, Resources, Toleration
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.contracts import ClusterObservation, PodEvent, PodEventsInput
from scaling.nodes.explain import last_demand_of, problems_by_shape
from scaling.nodes.loop import within_in_flight_limit
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, Attempt, AttemptResult, NodeGroup, RequestPhase
from scaling.nodes.nodegroups import parse_node_group
from scaling.nodes.observation import event_batches
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_up.batches import BATCH_MAX, batch_indexes, start_chunks
from scaling.nodes.scale_up.decision import ScaleUpInput, decide_scale_up, in_flight_runs
from scaling.nodes.scale_up.demand import MAX_SHAPES, SHAPE_SAMPLE, observe_demand
from scaling.nodes.scale_up.planning import plan_demand
from scaling.nodes.scale_up.requests import (
    START_BATCH,
    NodeRequestBatchStatus,
    NodeRequestStatus,
    StartRequestsInput,
    batch_input,
    in_flight_record,
    member_id,
    request_input,
)
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import (
    RECENT_REQUESTS_KEPT,
    REPORTED_PODS_KEPT,
    AutoscalerInput,
    NodeAutoscalerState,
    in_flight_for_planner,
    record_request_update,
)

LIMIT = 256 * 1024
GI = 2**30
BURST_AT = datetime(2026, 11, 26, 2, 0, 0, 123456, tzinfo=UTC)


def size(value: object) -> int:
    return pydantic_data_converter.payload_converter.to_payloads([value])[0].ByteSize()


@functools.cache  # one burst for the module (~1 CPU-s to build); no test changes it
def burst() -> tuple[list[PodInfo], list[NodeInfo], list[NodeGroup]]:
    pods: list[PodInfo] = []
    # 28,000 replicas of 40 Deployments, and 2,000 pods each with its own requests (worst case).
    for d in range(40):
        for i in range(700):
            pods.append(
                PodInfo(
                    namespace=f"team-{d % 7}",
                    name=f"app-{d}-{i:05d}",
                    uid=f"{d:04d}-{i:08d}-0000-0000-000000000000",
                    labels={"app": f"app-{d}", "pod-template-hash": "5d8f7c9b4"},
                    requests=Resources(cpu_m=100 + 10 * d, memory=(128 + 16 * d) * 2**20, pods=1),
                    tolerations=[Toleration(key="dedicated", value="batch")] if d % 5 == 0 else [],
                    controller_kind="ReplicaSet",
                    unschedulable=True,
                )
            )
    for i in range(2000):
        pods.append(
            PodInfo(
                namespace="jobs",
                name=f"job-{i:05d}",
                uid=f"ffff-{i:08d}-0000-0000-000000000000",
                requests=Resources(cpu_m=50 + i, memory=64 * 2**20, pods=1),
                controller_kind="Job",
                unschedulable=True,
            )
        )
    nodes = [
        NodeInfo(
            name=f"node-{i:05d}",
            labels={
                LABEL_HOSTNAME: f"node-{i:05d}",
                LABEL_INSTANCE_TYPE: "cx32",
                **({LABEL_GROUP: "general", LABEL_POOL: "kwok-cx32"} if i % 2 else {}),
            },
            allocatable=Resources(cpu_m=4000, memory=8 * GI, pods=110),
            requested=Resources(cpu_m=4000, memory=6 * GI, pods=30),  # full: nothing settles
            ready=True,
        )
        for i in range(5000)
    ]
    group = parse_node_group(
        {
            "metadata": {"name": "general"},
            "spec": {
                "pools": [
                    {"provider": "kwok", "serverType": ["cx22", "cx32", "cx42", "cx52"], "priority": 10},
                ],
            },
        },
        ["kwok"],
    )
    return pods, nodes, [group]


def test_a_30000_pod_5000_node_burst_keeps_every_payload_under_256_kb() -> None:
    pods, nodes, groups = burst()
    full = ClusterObservation(unschedulable=pods, nodes=nodes, groups=groups)
    assert size(full) > 8 * LIMIT  # what the observer sent before aggregating: many MB

    demand = observe_demand(pods, nodes, sample=SHAPE_SAMPLE, max_shapes=MAX_SHAPES)
    obs = ClusterObservation(demand=demand, groups=groups, pods_total=len(pods), pods_running=0)
    assert size(obs) < LIMIT
    assert demand.unschedulable == 30_000 and demand.nodes.total == 5000
    assert len(demand.shapes) == MAX_SHAPES
    assert sum(s.count for s in demand.shapes) + demand.pods_deferred == 30_000

    plan = plan_demand(demand, groups, catalogue_index(kwok_catalogue()), [])
    assert plan.new_nodes and not plan.problems
    # Every pod of every planned shape is on a planned node (count), though few are named.
    assert sum(sum(n.pods.values()) for n in plan.new_nodes) == 30_000 - demand.pods_deferred

    settings = AutoscalerSettings(cluster="big")
    state = NodeAutoscalerState()
    biggest_input = biggest_signal = 0
    requested = within_in_flight_limit(plan.new_nodes, 0, settings.max_requests_in_flight)
    assert len(plan.new_nodes) > len(requested) == settings.max_requests_in_flight
    for i, planned in enumerate(requested):
        # In flight as the loop records batch members (`<batch id>#<index>`): longer ids.
        rid = member_id(f"nodes/big/request/{i // BATCH_MAX:06d}-abcd", i % BATCH_MAX)
        inp = request_input(rid, planned, groups[0], settings, "nodes/big")
        biggest_input = max(biggest_input, size(inp))
        started = BURST_AT + timedelta(seconds=i * 0.4)  # a burst's starts spread over minutes
        record = in_flight_record(rid, planned, started)
        state.in_flight[rid] = record
        # What a request signals: its status without its pods (the autoscaler kept them); here
        # Provisioning, its largest in flight (a node, a provider id, its attempt).
        node = f"big-kwok-cx32-{i:08x}"
        attempt = Attempt(
            pool=record.current_pool,
            result=AttemptResult.PROVISIONING,
            timestamp=started + timedelta(seconds=3.217),
            node_name=node,
        )
        signal = record.model_copy(
            update={
                "pod_uids": [],
                "pods": {},
                "phase": RequestPhase.PROVISIONING,
                "node_name": node,
                "provider_id": f"kwok://{node}",
                "attempts": [attempt],
            }
        )
        biggest_signal = max(biggest_signal, size(signal))
        record_request_update(state, signal)
    assert biggest_input < 16 * 1024 and biggest_signal < 4 * 1024
    held = sum(sum(r.pods.values()) for r in in_flight_for_planner(state.in_flight))
    assert held == sum(sum(n.pods.values()) for n in requested)

    # The next loop sees the same pods: those the requests hold are covered, the rest planned
    # anew (the same nodes the first plan had beyond the limit).
    again = plan_demand(demand, groups, catalogue_index(kwok_catalogue()), in_flight_for_planner(state.in_flight))
    assert again.pods_covered >= held
    assert len(again.new_nodes) <= len(plan.new_nodes) - len(requested)
    assert within_in_flight_limit(again.new_nodes, len(state.in_flight), settings.max_requests_in_flight) == []

    # Finished requests kept for status, each with the attempts a fallback makes.
    for i in range(RECENT_REQUESTS_KEPT + 10):
        rid = f"nodes/big/request/{100000 + i:06d}-abcd"
        attempts = [
            Attempt(
                pool=f"kwok-cx{n}2",
                result=AttemptResult.INSUFFICIENT_CAPACITY,
                timestamp=datetime.now(UTC),
                message="server type cx22 is unavailable in location fsn1 (resource_unavailable)",
            )
            for n in range(2, 6)
        ]
        state.in_flight[rid] = NodeRequestStatus(id=rid, group="general", pods={"k": 3}, pod_uids=["u1", "u2"])
        final = NodeRequestStatus(id=rid, group="general", phase=RequestPhase.READY, attempts=attempts)
        record_request_update(state, final)
    assert len(state.recent) == RECENT_REQUESTS_KEPT and len(state.in_flight) == settings.max_requests_in_flight

    # What `explain` keeps of the last loop: pods per shape, and one problem per shape (here
    # every shape's: a group limit leaves all but one node's pods MaxNodesReached).
    capped = plan_demand(demand, [groups[0].model_copy(update={"max_nodes": 1})], catalogue_index(kwok_catalogue()), [])
    state.last_demand = last_demand_of((s.key, s.count) for s in demand.shapes)
    state.last_problems = problems_by_shape(capped.problems)
    assert len(state.last_problems) >= MAX_SHAPES - 1

    # Pods already evented for a problem, as many as are kept.
    state.reported_pods = [f"{i:08d}-0000-0000-0000-000000000000/NotTriggerScaleUp" for i in range(REPORTED_PODS_KEPT)]

    carried = AutoscalerInput(settings=settings, state=state)
    print(
        f"\nobservation {size(obs)} B (per pod and node: {size(full)} B), {len(plan.new_nodes)} nodes planned,"
        f" largest input {biggest_input} B, largest signal {biggest_signal} B, state {size(carried)} B"
    )
    assert size(carried) < LIMIT

    # Events go to the named pods, a bounded sample, in batches.
    named = [p for s in demand.shapes for p in s.pods]
    assert len(named) <= MAX_SHAPES * SHAPE_SAMPLE
    events = [
        PodEvent(
            namespace=p.namespace,
            pod_name=p.name,
            pod_uid=p.uid,
            reason="TriggeredScaleUp",
            message="pod triggered scale-up: group general, pool kwok-cx52, request nodes/big/request/000123-abcd",
        )
        for p in named
    ]
    batches = event_batches(events)
    assert sum(len(b) for b in batches) == len(events)
    assert max(size(PodEventsInput(cluster="big", events=b)) for b in batches) < LIMIT


def test_a_burst_in_request_batches_keeps_every_payload_under_256_kb() -> None:
    """A full batch's input, a start activity's input (START_BATCH nodes of batches), the
    batch's status (its result and `describe`, each member with every attempt it may make, at
    the longest message) and its largest report to the loop."""
    pods, nodes, groups = burst()
    demand = observe_demand(pods, nodes, sample=SHAPE_SAMPLE, max_shapes=MAX_SHAPES)
    plan = plan_demand(demand, groups, catalogue_index(kwok_catalogue()), [])
    settings = AutoscalerSettings(cluster="big")
    requested = within_in_flight_limit(plan.new_nodes, 0, settings.max_requests_in_flight)
    batches = [
        batch_input(f"nodes/big/request/{i:06d}-abcd", [requested[k] for k in b], groups[0], settings, "nodes/big")
        for i, b in enumerate(batch_indexes(requested, [None] * len(requested)))
    ]
    assert max(len(b.members) for b in batches) == BATCH_MAX
    assert len(batches) < len(requested) / 10  # a burst's nodes are few kinds: far fewer workflows
    biggest_batch = max(size(b) for b in batches)
    starts = [
        StartRequestsInput(cluster="big", batches=[batches[i] for i in chunk])
        for chunk in start_chunks([len(b.members) for b in batches], START_BATCH)
    ]
    biggest_start = max(size(s) for s in starts)

    full = max(batches, key=lambda b: len(b.members))
    at = BURST_AT
    members = []
    for i, m in enumerate(full.members):
        node = f"big-kwok-cx32-{i:08x}"
        attempts = [
            Attempt(
                pool=p.name, result=AttemptResult.READINESS_TIMEOUT, timestamp=at, node_name=node, message="x" * 500
            )
            for p in (full.candidates * settings.max_attempts)[: settings.max_attempts]
        ]
        members.append(
            NodeRequestStatus(
                id=member_id(full.id, i),
                group=full.group,
                phase=RequestPhase.UNMET,
                requirements=m.requirements,
                pod_uids=m.pod_uids,
                pods=m.pods,
                attempts=attempts,
                node_name=node,
                provider_id=f"kwok://{node}",
                started_at=at,
                finished_at=at,
                message="y" * 500,
            )
        )
    status = NodeRequestBatchStatus(id=full.id, cluster="big", group=full.group, members=members)
    report = [m.model_copy(update={"pod_uids": [], "pods": {}}) for m in members]
    print(
        f"\n{len(batches)} batches for {len(requested)} nodes; largest batch input {biggest_batch} B,"
        f" start input {biggest_start} B, batch status {size(status)} B, report {size(report)} B"
    )
    assert max(biggest_batch, biggest_start, size(status), size(report)) < LIMIT


def test_an_affinity_heavy_observation_stays_under_256_kb() -> None:
    """30,000 pending pods of 50 workloads with pod affinity and anti-affinity on the zone and
    the hostname, 5,000 nodes each running a pod: shapes carry their terms and per-zone counts
    (the hostname pairs dropped), never per-pod or per-node lists."""
    from bench.workload import affinity_workload
    from scaling.kube.scheduling.cluster import Cluster

    w = affinity_workload(30_000, node_count=5000)
    running = [p for p in w.pods if p.node_name]
    pending = [p for p in w.pods if not p.node_name]
    by_node: dict[str, list] = {}
    for p in running:
        by_node.setdefault(p.node_name or "", []).append(p)
    demand = observe_demand(
        pending, w.nodes, sample=SHAPE_SAMPLE, max_shapes=MAX_SHAPES, cluster=Cluster(nodes=w.nodes, pods=by_node)
    )
    obs = ClusterObservation(demand=demand, groups=[w.group], pods_total=len(w.pods), pods_running=len(running))
    assert size(obs) < LIMIT, size(obs)
    assert demand.unschedulable == 30_000 and len(demand.shapes) == 50
    assert all(s.scheduling is not None for s in demand.shapes)


def test_a_burst_s_recorded_decisions_stay_under_256_kb() -> None:
    """The loop's recorded scale-up decision (its input and its plan, contracts.PLAN_SCALE_UP):
    the first loop of the burst plans max_requests_in_flight nodes, the next one sees them in flight."""
    pods, nodes, groups = burst()
    demand = observe_demand(pods, nodes, sample=SHAPE_SAMPLE, max_shapes=MAX_SHAPES)
    settings = AutoscalerSettings(cluster="big")
    first = decide_scale_up(
        ScaleUpInput(demand=demand, groups=groups, catalogue=kwok_catalogue(), max_requests_in_flight=1500)
    )
    planned, gates = first.planned()
    assert len(planned) == settings.max_requests_in_flight and gates == [None] * len(planned)
    assert len(first.new_nodes) < len(planned) / 10  # runs of identical nodes
    state = NodeAutoscalerState()
    for i, node in enumerate(planned):
        rid = member_id(f"nodes/big/request/{i // BATCH_MAX:06d}-abcd", i % BATCH_MAX)
        state.in_flight[rid] = in_flight_record(rid, node, BURST_AT)
    in_flight = in_flight_for_planner(state.in_flight)
    second = decide_scale_up(
        ScaleUpInput(
            demand=demand,
            groups=groups,
            catalogue=kwok_catalogue(),
            in_flight=in_flight_runs(in_flight),
            requests_in_flight=len(in_flight),
        )
    )
    assert second.plan.pods_covered > 0 and second.planned()[0] == []
    print(f"\nrecorded decision: first loop {size(first)} B, next loop {size(second)} B")
    assert size(first) < LIMIT and size(second) < LIMIT
