"""Topology spread over zones (DoNotSchedule, topologyKey zone): parsing, sharing pods out over
the zones pools reach, settling within the skew, and the plan per zone."""

from __future__ import annotations

from collections import Counter
from typing import Any

from scaling.kube.affinity import topology_spreads
from scaling.kube.models import LABEL_ZONE, NodeInfo, PodInfo, Resources, TopologySpread
from scaling.kube.pods import pod_info
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.models import NodeGroup
from scaling.nodes.nodegroups import parse_node_group
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_up.planning import plan_scale_up
from scaling.nodes.scale_up.topology import base_key, same_shape, share_key, share_out

CAT = catalogue_index(kwok_catalogue())
GI = 2**30
ZONE_SPREAD = {
    "maxSkew": 1,
    "topologyKey": LABEL_ZONE,
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "web"}},
}
SPREAD = TopologySpread(key=LABEL_ZONE, match_labels=(("app", "web"),), namespaces=("ns",), max_skew=1)


def zoned_group(zones: list[str], server_type: str = "cx22", **spec: Any) -> NodeGroup:
    pools = [{"provider": "kwok", "serverType": [server_type], "priority": 10, "config": {"zone": z}} for z in zones]
    return parse_node_group({"metadata": {"name": "g"}, "spec": {"pools": pools, **spec}}, {"kwok"})


def web_pods(n: int, cpu_m: int = 1500, prefix: str = "w", node: str | None = None) -> list[PodInfo]:
    """Pods of a Deployment spread over zones (maxSkew 1), via the observer's parser."""
    return [
        pod_info(
            {
                "metadata": {
                    "namespace": "ns",
                    "name": f"{prefix}{i}",
                    "uid": f"{prefix}{i}",
                    "labels": {"app": "web"},
                },
                "spec": {
                    "nodeName": node,
                    "topologySpreadConstraints": [ZONE_SPREAD],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": "1Gi"}}}],
                },
                "status": {"phase": "Running" if node else "Pending"},
            }
        )
        for i in range(n)
    ]


def zone_node(name: str, zone: str, cpu_m: int, used_m: int = 0) -> NodeInfo:
    return NodeInfo(
        name=name,
        labels={LABEL_ZONE: zone, "kubernetes.io/hostname": name},
        allocatable=Resources(cpu_m=cpu_m, memory=16 * GI, pods=110),
        requested=Resources(cpu_m=used_m, memory=0, pods=0),
        ready=True,
    )


def zones_of(plan) -> Counter[str]:  # noqa: ANN001
    return Counter(n.pool.rsplit("-", 1)[-1] for n in plan.new_nodes for _ in n.pod_uids)


def test_zone_spreads_are_read_and_hostname_or_soft_ones_are_not() -> None:
    soft = {**ZONE_SPREAD, "whenUnsatisfiable": "ScheduleAnyway"}
    host = {**ZONE_SPREAD, "topologyKey": "kubernetes.io/hostname"}
    meta = {"namespace": "ns", "labels": {"app": "web"}}
    assert topology_spreads(meta, {"topologySpreadConstraints": [ZONE_SPREAD, soft, host]}) == [SPREAD]
    other = topology_spreads({"namespace": "ns", "labels": {"app": "db"}}, {"topologySpreadConstraints": [ZONE_SPREAD]})
    assert [t.counts_self for t in other] == [False]


def test_pods_are_shared_out_to_the_least_loaded_zone() -> None:
    assert share_out({}, {"a", "b"}, 6, SPREAD) == ({"a": 3, "b": 3}, 0)
    # b lags by 4: it takes pods until level, then they alternate.
    assert share_out({"a": 4, "b": 0}, {"a", "b"}, 6, SPREAD) == ({"a": 1, "b": 5}, 0)
    # Zone c (no pool reaches it) holds the minimum: a and b take one each, the rest must wait.
    assert share_out({"c": 0}, {"a", "b"}, 5, SPREAD) == ({"a": 1, "b": 1}, 3)
    assert share_out({"a": 1}, set(), 2, SPREAD) == ({}, 2)


def test_room_on_ready_nodes_takes_a_pod_once_the_skew_admits_it_there() -> None:
    """Differential seed 12: zones a, b, c hold 1, 0, 1 pods, and a Ready node in c has room for
    one more. The first pod must go to b; then every zone is admitted, and c's room takes the
    second (the scheduler's only node for it when no node is bought in a), not a new node in a."""
    assert share_out({"a": 1, "b": 0, "c": 1}, {"a", "b", "c"}, 2, SPREAD) == ({"a": 1, "b": 1}, 0)
    assert share_out({"a": 1, "b": 0, "c": 1}, {"a", "b", "c"}, 2, SPREAD, {"c": 1}) == ({"b": 1, "c": 1}, 0)
    # Room the skew never admits is not used, and room runs out: then the least loaded again.
    assert share_out({"a": 0, "b": 0, "c": 2}, {"a", "b", "c"}, 2, SPREAD, {"c": 3}) == ({"a": 1, "b": 1}, 0)
    assert share_out({"a": 0, "b": 0, "c": 0}, {"a", "b", "c"}, 4, SPREAD, {"c": 1}) == ({"a": 2, "b": 1, "c": 1}, 0)


def test_a_burst_is_planned_evenly_over_the_zones() -> None:
    plan = plan_scale_up(web_pods(6), [], [zoned_group(["za", "zb", "zc"])], CAT, [])
    assert plan.problems == []
    assert zones_of(plan) == {"za": 2, "zb": 2, "zc": 2}
    # Every node carries its zone's pods only, and its request is keyed by the zone's share.
    for n in plan.new_nodes:
        (key,) = n.pods
        assert key.endswith("@" + n.pool.rsplit("-", 1)[-1]) and same_shape(key, base_key(key))


def test_pending_pods_go_where_the_running_ones_are_few() -> None:
    running = web_pods(3, prefix="r", node="a1")
    nodes = [zone_node("a1", "za", cpu_m=4500, used_m=4500), zone_node("b1", "zb", cpu_m=1500, used_m=1500)]
    plan = plan_scale_up(running + web_pods(4), nodes, [zoned_group(["za", "zb"])], CAT, [])
    assert plan.problems == []
    assert zones_of(plan) == {"zb": 3, "za": 1}  # b catches up to 3, then one each way


def test_free_room_in_a_crowded_zone_does_not_count_as_a_place() -> None:
    # a1 has room, but its zone already runs 2 web pods and b none: the scheduler would refuse.
    running = web_pods(2, prefix="r", node="a1")
    nodes = [zone_node("a1", "za", cpu_m=8000, used_m=3000), zone_node("b1", "zb", cpu_m=1500, used_m=1500)]
    plan = plan_scale_up(running + web_pods(2), nodes, [zoned_group(["za", "zb"])], CAT, [])
    assert plan.fits_existing == [] and zones_of(plan) == {"zb": 2}
    # Balanced zones: the pod settles in a1's room and nothing is planned.
    running = web_pods(1, prefix="r", node="a1") + web_pods(1, prefix="s", node="b1")
    plan = plan_scale_up(running + web_pods(1), nodes, [zoned_group(["za", "zb"])], CAT, [])
    assert plan.fits_existing == ["w0"] and plan.new_nodes == []


def test_pods_only_a_zone_without_pools_could_take_are_a_problem_that_says_so() -> None:
    running = web_pods(1, prefix="r", node="a1")
    nodes = [zone_node("a1", "za", cpu_m=1500, used_m=1500), zone_node("c1", "zc", cpu_m=1500, used_m=1500)]
    plan = plan_scale_up(running + web_pods(3), nodes, [zoned_group(["za", "zb"])], CAT, [])
    assert zones_of(plan) == {"zb": 1}
    problem = plan.problems[-1]
    assert {p.reason for p in plan.problems} == {"TopologySpread"} and sum(p.count for p in plan.problems) == 2
    assert "least loaded domain" in problem.message and "za, zb" in problem.message
    assert problem.key == base_key(share_key(problem.key, "zb"))


def test_pools_whose_nodes_lack_the_zone_label_cannot_take_spread_pods() -> None:
    group = parse_node_group(
        {"metadata": {"name": "g"}, "spec": {"pools": [{"provider": "kwok", "serverType": ["cx22"], "priority": 1}]}},
        {"kwok"},
    )
    pods = [
        p.model_copy(update={"topology_spreads": [SPREAD.model_copy(update={"key": "example.com/rack"})]})
        for p in web_pods(2)
    ]
    plan = plan_scale_up(pods, [], [group], CAT, [])
    assert plan.new_nodes == [] and [p.reason for p in plan.problems] == ["TopologySpread"] * 2
    assert "carry the label example.com/rack" in plan.problems[0].message


def test_one_type_may_be_a_pool_in_each_zone() -> None:
    group = zoned_group(["za", "zb"])
    assert [p.server_types for p in group.pools] == [["cx22"], ["cx22"]]
    plan = plan_scale_up(web_pods(2), [], [group], CAT, [])
    assert sorted(n.pool for n in plan.new_nodes) == ["kwok-cx22-za", "kwok-cx22-zb"]


def _zone_requests(plan) -> list:  # noqa: ANN001
    """The in-flight records of a plan's nodes, as the loop keeps them (id = pool + index)."""
    from scaling.nodes.models import InFlightRequest

    return [
        InFlightRequest(
            id=f"{n.pool}-{i}",
            group=n.group,
            pool=n.pool,
            server_type="cx22",
            provider="kwok",
            requirements=n.requirements,
            pods=n.pods,
        )
        for i, n in enumerate(plan.new_nodes)
    ]


def test_a_ready_node_the_skew_keeps_empty_for_now_is_no_reason_for_another_node() -> None:
    """The e2e's 5th node for 4 spread pods, forced: both za requests are Ready and finished
    (out of flight); one za pod runs, the other za node is Ready but empty, and zb's nodes
    exist but are not Ready yet. The scheduler keeps the second za pod off the empty za node
    (za 2 vs zb 0 would break maxSkew 1) until zb runs one; that node's room is still where it
    goes, so nothing new is planned."""
    group = zoned_group(["za", "zb"])
    first = plan_scale_up(web_pods(4), [], [group], CAT, [])
    assert zones_of(first) == {"za": 2, "zb": 2}
    in_zb = [r for r in _zone_requests(first) if r.pool.endswith("-zb")]
    nodes = [
        zone_node("a1", "za", cpu_m=2000, used_m=1500),
        zone_node("a2", "za", cpu_m=2000),
        zone_node("b1", "zb", cpu_m=2000).model_copy(update={"ready": False}),
        zone_node("b2", "zb", cpu_m=2000).model_copy(update={"ready": False}),
    ]
    pods = web_pods(1, prefix="r", node="a1") + web_pods(3)
    plan = plan_scale_up(pods, nodes, [group], CAT, in_zb)
    assert plan.new_nodes == [] and plan.problems == []
    assert plan.pods_covered == 2 and plan.pods_fit_existing == 1  # zb's requests, a2's room
    # Without a2 the za pod does need a node, in za.
    plan = plan_scale_up(pods, [n for n in nodes if n.name != "a2"], [group], CAT, in_zb)
    assert zones_of(plan) == {"za": 1}


def test_ready_nodes_of_in_flight_requests_are_counted_once_under_the_skew() -> None:
    """All four nodes Ready, no pod bound yet, the requests not yet reported: the observer
    settles within the skew (a1, b1, b2 in node order), a2's room waits for the skew; the
    requests whose nodes are Ready count as those nodes only (counted_once), not twice."""
    from scaling.nodes.state import counted_once

    group = zoned_group(["za", "zb"])
    first = plan_scale_up(web_pods(4), [], [group], CAT, [])
    requests = _zone_requests(first)
    nodes = [zone_node(n, z, cpu_m=2000) for n, z in (("a1", "za"), ("a2", "za"), ("b1", "zb"), ("b2", "zb"))]
    in_flight = counted_once(requests, [r.id for r in requests])
    assert in_flight == []
    plan = plan_scale_up(web_pods(4), nodes, [group], CAT, in_flight)
    assert plan.new_nodes == [] and plan.pods_fit_existing == 4
