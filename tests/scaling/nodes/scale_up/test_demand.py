from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
from scaling.nodes.scale_up.demand import demand_key, observe_demand

GI = 2**30


def pods(n: int, cpu_m: int, prefix: str, **kw: object) -> list[PodInfo]:
    return [
        PodInfo(
            namespace="ns",
            name=f"{prefix}{i}",
            uid=f"{prefix}{i}",
            requests=Resources(cpu_m=cpu_m, memory=GI, pods=1),
            unschedulable=True,
            **kw,
        )  # fmt: skip
        for i in range(n)
    ]


def node(name: str, free_cpu_m: int, **labels: str) -> NodeInfo:
    return NodeInfo(
        name=name,
        labels=labels,
        allocatable=Resources(cpu_m=4000, memory=16 * GI, pods=110),
        requested=Resources(cpu_m=4000 - free_cpu_m, memory=GI, pods=1),
        ready=True,
    )


def test_identical_pods_are_one_shape_with_a_count_and_a_bounded_sample() -> None:
    web, api = pods(50, 500, "web"), pods(7, 250, "api", node_selector={"disk": "ssd"})
    demand = observe_demand(web + api, [], sample=3)
    assert [(s.count, len(s.pods)) for s in demand.shapes] == [(50, 3), (7, 3)]  # largest first
    assert demand.shapes[0].key == demand_key(web[0]) != demand_key(api[0])
    assert [p.name for p in demand.shapes[0].pods] == ["web0", "web1", "web2"]
    assert demand.unschedulable == 57 and demand.fits_existing == 0


def test_pods_that_fit_free_room_are_settled_and_only_counts_cross() -> None:
    nodes = [
        node("full", 0, **{LABEL_GROUP: "g", LABEL_POOL: "p"}),
        node("room", 1000, **{LABEL_GROUP: "g", LABEL_POOL: "p"}),
        node("other", 4000),
    ]
    demand = observe_demand(pods(12, 500, "web"), nodes, sample=2)
    # 1000m free on "room" and 4000m on "other": ten 500m pods settle, two are demand.
    assert demand.fits_existing == 10 and [s.count for s in demand.shapes] == [2]
    assert len(demand.fits_existing_pods) == 2  # named, bounded
    assert demand.nodes.total == 3
    assert [(c.group, c.pool, c.count) for c in demand.nodes.groups] == [("g", "p", 2)]


def test_shapes_beyond_the_bound_wait_and_are_counted() -> None:
    many = [p for i in range(10) for p in pods(i + 1, 100 + i, f"s{i}-")]
    demand = observe_demand(many, [], max_shapes=4)
    assert sorted(s.count for s in demand.shapes) == [7, 8, 9, 10]  # the largest groups first
    assert demand.pods_deferred == sum(range(1, 7))
    assert demand.unschedulable == sum(range(1, 11))


def test_virtual_pods_are_their_own_named_shape_outside_the_counts() -> None:
    headroom = PodInfo(
        namespace="", name="headroom/g", uid="headroom/g", requests=Resources(cpu_m=500, memory=GI, pods=1)
    )
    demand = observe_demand(pods(3, 500, "web"), [], virtual=[headroom], sample=1, max_shapes=1)
    by_key = {s.key: s for s in demand.shapes}
    assert by_key["headroom/g"].count == 1 and by_key["headroom/g"].pods[0].uid == "headroom/g"
    assert demand.unschedulable == 3 and demand.pods_deferred == 0
    # Held by a node's free room: settled, and not counted as a pod that fits.
    held = observe_demand([], [node("n", 1000)], virtual=[headroom])
    assert held.shapes == [] and held.fits_existing == 0 and held.fits_existing_pods == []
