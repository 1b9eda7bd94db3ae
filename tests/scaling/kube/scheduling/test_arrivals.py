"""Where the scheduler puts pods that arrive together, in every order (scaling.kube.scheduling.arrivals).

The scores are the default profile's NodeResourcesFit LeastAllocated plus BalancedAllocation
(test_scoring.py ports their upstream cases); these cases are about the order: the first pod to
arrive takes the emptiest node, whatever a first-fit plan had kept that room for."""

from __future__ import annotations

from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.kube.scheduling import arrivals
from scaling.kube.scheduling.arrivals import Target, stranded

GI = 1024**3
CPU, MEM = 3920, 6 * GI  # a cx32's allocatable


def node(name: str, labels: dict[str, str] | None = None) -> NodeInfo:
    return NodeInfo(name=name, labels=labels or {}, allocatable=Resources(cpu_m=CPU, memory=MEM, pods=110), ready=True)


def target(name: str, cpu: int, mem: int, labels: dict[str, str] | None = None) -> Target:
    """A cx32 whose pods request ``cpu`` and ``mem``."""
    return Target(node(name, labels), (CPU - cpu, MEM - mem, 100), (cpu, mem, cpu, mem))


def pod(name: str, cpu: int, mem: int, **kw: object) -> PodInfo:
    return PodInfo(namespace="default", name=name, uid=name, requests=Resources(cpu_m=cpu, memory=mem, pods=1), **kw)


def selector_admits(p: PodInfo, n: NodeInfo) -> bool:
    return all(n.labels.get(k) == v for k, v in p.node_selector.items())


API = dict(cpu=1000, mem=2 * GI)
CACHE = dict(cpu=500, mem=3 * GI)


def test_an_early_pod_takes_the_emptiest_node_and_strands_the_one_only_that_node_held() -> None:
    # First fit (largest cpu first, nodes by name) puts the api on d (2 GiB free) and the cache on m
    # (3.1 GiB free). The scheduler sends an api that arrives first to m, whose room it scores higher
    # (LeastAllocated: the more free cpu and memory, the better), and the cache then fits no node.
    d = target("d", cpu=1000, mem=MEM - 2 * GI - GI // 10)
    m = target("m", cpu=500, mem=MEM - 3 * GI - GI // 10)
    api, cache = pod("api", **API), pod("cache", **CACHE)
    play = stranded([api, cache], [d, m], selector_admits)
    assert play.complete
    assert play.stranded == cache and play.order == [api, cache]
    # The other order is placed: cache to m (the one node it fits), api to d.
    assert stranded([cache], [d, m], selector_admits).stranded is None


def test_pods_every_order_places_are_not_stranded() -> None:
    d = target("d", cpu=1000, mem=MEM - 2 * GI - GI // 10)
    m = target("m", cpu=500, mem=MEM - 3 * GI - GI // 10)
    roomy = target("e", cpu=0, mem=0)  # an empty node: the api goes there, whatever comes first
    play = stranded(
        [pod("api", **API), pod("cache", **CACHE), pod("web", cpu=250, mem=GI // 2)], [d, m, roomy], selector_admits
    )
    assert play.complete and play.stranded is None and play.order == []


def test_a_tie_the_scheduler_may_break_either_way_is_played_both_ways() -> None:
    # a and b score alike for the web pod (the same room); the scheduler picks at random among them.
    # Only a admits the cache: a web pod that took a leaves the cache nowhere.
    a = target("a", cpu=0, mem=MEM - 3 * GI, labels={"disk": "ssd"})
    b = target("b", cpu=0, mem=MEM - 3 * GI)
    web, cache = pod("web", cpu=250, mem=GI), pod("cache", node_selector={"disk": "ssd"}, **CACHE)
    play = stranded([web, cache], [a, b], selector_admits)
    assert play.stranded == cache and play.order == [web, cache]
    # Without the tie (b a little emptier) the web goes to b in every order.
    b = target("b", cpu=0, mem=MEM - 3 * GI - GI // 4)
    assert stranded([web, cache], [a, b], selector_admits).stranded is None


def test_pods_of_one_shape_are_played_as_one_kind() -> None:
    # Six webs over three empty nodes: one order of kinds, many of pods; each state is visited once.
    nodes = [target(f"n{i}", cpu=0, mem=0) for i in range(3)]
    webs = [pod(f"web-{i}", cpu=250, mem=GI // 2) for i in range(6)]
    play = stranded(webs, nodes, selector_admits)
    assert play.complete and play.stranded is None


def test_a_play_too_large_to_finish_says_so(monkeypatch) -> None:
    monkeypatch.setattr(arrivals, "MAX_WORK", 1)
    d = target("d", cpu=1000, mem=MEM - 2 * GI - GI // 10)
    m = target("m", cpu=500, mem=MEM - 3 * GI - GI // 10)
    play = stranded([pod("api", **API), pod("cache", **CACHE)], [d, m], selector_admits)
    assert not play.complete and play.stranded is None


def test_pods_with_more_room_than_any_order_can_take_need_no_play(monkeypatch) -> None:
    # Each pod fits more nodes than there are other pods (each takes room on one), or one node holds
    # them all: placed in every order whatever the scores, without playing one (a large cluster's case).
    monkeypatch.setattr(arrivals, "MAX_WORK", 0)
    pods = [pod("api", **API), pod("cache", **CACHE)]
    half = [target(f"n{i}", cpu=0, mem=MEM - 3 * GI) for i in range(2)]
    assert stranded(pods, half, selector_admits).complete
    one_roomy = [target("d", cpu=1000, mem=MEM - 2 * GI - GI // 10), target("e", cpu=0, mem=0)]
    assert stranded(pods, one_roomy, selector_admits).complete
    tight = [target("d", cpu=1000, mem=MEM - 2 * GI - GI // 10), target("m", cpu=500, mem=MEM - 3 * GI - GI // 10)]
    assert not stranded(pods, tight, selector_admits).complete  # a play was needed


def test_the_order_names_each_pod_once() -> None:
    # One web and the cache fit m's room, two webs and the cache do not: the order names both webs.
    m = target("m", cpu=0, mem=MEM - 4 * GI)
    play = stranded(
        [pod("web-1", cpu=250, mem=GI), pod("web-2", cpu=250, mem=GI), pod("cache", **CACHE)], [m], selector_admits
    )
    assert [p.name for p in play.order] == ["web-1", "web-2", "cache"]


def test_an_order_that_places_every_pod_is_found_when_another_strands_one() -> None:
    # The first case: an api that arrives first strands the cache; the cache first, both are placed.
    d = target("d", cpu=1000, mem=MEM - 2 * GI - GI // 10)
    m = target("m", cpu=500, mem=MEM - 3 * GI - GI // 10)
    api, cache = pod("api", **API), pod("cache", **CACHE)
    assert arrivals.placing_order([api, cache], [d, m], selector_admits) == [cache, api]


def test_an_order_must_place_every_pod_whichever_way_a_tie_goes() -> None:
    # a and b tie for the web; only a admits the cache. Cache first, it takes a, and the web b.
    a = target("a", cpu=0, mem=MEM - 3 * GI, labels={"disk": "ssd"})
    b = target("b", cpu=0, mem=MEM - 3 * GI)
    web, cache = pod("web", cpu=250, mem=GI), pod("cache", node_selector={"disk": "ssd"}, **CACHE)
    assert arrivals.placing_order([web, cache], [a, b], selector_admits) == [cache, web]
    # A second cache: a holds one only, so no order places every pod, and none is offered.
    cache2 = pod("cache-2", node_selector={"disk": "ssd"}, **CACHE)
    assert arrivals.placing_order([web, cache, cache2], [a, b], selector_admits) is None


def test_pods_every_order_places_keep_their_own_order() -> None:
    roomy = [target(f"e{i}", cpu=0, mem=0) for i in range(3)]
    pods = [pod("web", cpu=250, mem=GI // 2), pod("api", **API)]
    assert arrivals.placing_order(pods, roomy, selector_admits) == pods


def test_the_order_search_stops_at_its_bound(monkeypatch) -> None:  # noqa: ANN001
    d = target("d", cpu=1000, mem=MEM - 2 * GI - GI // 10)
    m = target("m", cpu=500, mem=MEM - 3 * GI - GI // 10)
    monkeypatch.setattr(arrivals, "MAX_WORK", 1)
    assert arrivals.placing_order([pod("api", **API), pod("cache", **CACHE)], [d, m], selector_admits) is None


def test_pods_taken_in_turn_go_each_to_its_best_scoring_node() -> None:
    # The web goes to the emptier node, not the first; the api then fits only where the web is not;
    # the cache fits nowhere once both took their room (-1, no room taken); a tie goes to the first.
    full = target("a", cpu=2000, mem=4 * GI)
    empty = target("b", cpu=0, mem=0)
    web, api, cache = pod("web", cpu=250, mem=GI // 2), pod("api", **API), pod("cache", cpu=500, mem=5 * GI)
    assert arrivals.bound_in_turn([web, api, cache], [full, empty], selector_admits) == [1, 1, -1]
    assert arrivals.bound_in_turn([web], [empty, target("c", cpu=0, mem=0)], selector_admits) == [0]
    # Filters first: a pod whose selector the emptier node fails goes to the other.
    picky = pod("picky", cpu=250, mem=GI // 2, node_selector={"disk": "ssd"})
    ssd = target("s", cpu=2000, mem=4 * GI, labels={"disk": "ssd"})
    assert arrivals.bound_in_turn([picky], [empty, ssd], selector_admits) == [1]


def test_the_play_in_turn_stops_at_its_work_bound() -> None:
    nodes = [target(n, cpu=0, mem=0) for n in "abc"]
    pods = [pod(f"p{i}", cpu=100, mem=GI // 8) for i in range(3)]
    # Three scores a pod: the work bound of 7 scores the first two pods, and the answer names them only.
    assert arrivals.bound_in_turn(pods, nodes, selector_admits, work=7) == [0, 1]
