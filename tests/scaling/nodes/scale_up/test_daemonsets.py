from typing import Any

from scaling.kube.models import Resources, Taint
from scaling.nodes.models import InFlightRequest
from scaling.nodes.scale_up.daemonsets import daemonset_overhead, daemonset_shapes, room_for_pods
from scaling.nodes.scale_up.demand import observe_demand
from scaling.nodes.scale_up.planning import plan_demand
from tests.scaling.nodes.scale_up.test_planning import CAT, MI, group, pods


def daemonset(name: str, cpu: str, memory: str = "64Mi", **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {
        "metadata": {"namespace": "kube-system", "name": name},
        "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container], **spec}}},
    }


def test_daemonset_templates_become_one_pod_shapes() -> None:
    [logs, gpu] = daemonset_shapes([daemonset("logs", "200m"), daemonset("gpu", "100m", nodeSelector={"gpu": "yes"})])
    assert logs.requests == Resources(cpu_m=200, memory=64 * MI, pods=1) and logs.count == 1
    assert gpu.node_selector == {"gpu": "yes"}
    # Only the DaemonSets that would run on the node count: selector and taints decide.
    assert daemonset_overhead([logs, gpu], {}, []).cpu_m == 200
    assert daemonset_overhead([logs, gpu], {"gpu": "yes"}, []).cpu_m == 300
    assert daemonset_overhead([logs, gpu], {}, [Taint(key="dedicated", value="db")]).cpu_m == 0
    assert room_for_pods(Resources(cpu_m=100, memory=MI, pods=3), logs.requests) == Resources(pods=2)


def test_a_new_node_keeps_room_for_its_daemonsets() -> None:
    g = group("g", [(["cx22", "cx32"], 10)])
    # A 1,500m pod fits a cx22 (1,930m allocatable); beside a 500m DaemonSet it does not.
    demand = observe_demand(pods(1, cpu_m=1500), [])
    plain = plan_demand(demand.model_copy(deep=True), [g], CAT, [])
    assert [n.pool for n in plain.new_nodes] == ["kwok-cx22"]
    ds = daemonset_shapes([daemonset("agent", "500m")])
    with_ds = plan_demand(demand.model_copy(update={"daemonsets": ds}, deep=True), [g], CAT, [])
    assert [n.pool for n in with_ds.new_nodes] == ["kwok-cx32"] and not with_ds.problems
    # No fallback to a type the DaemonSets leave too small.
    assert all(c.server_type != "cx22" for n in with_ds.new_nodes for c in n.candidates)


def test_a_request_in_flight_has_room_only_beside_its_daemonsets() -> None:
    g = group("g", [(["cx32"], 10)])
    # A cx32 (3,920m) made for one 1,500m pod: room for one more, not with a 1,000m DaemonSet.
    request = InFlightRequest(id="r", group="g", pool="kwok-cx32", server_type="cx32", provider="kwok",
                              requirements=Resources(cpu_m=1500, memory=512 * MI, pods=1), pods={"x": 1})  # fmt: skip
    demand = observe_demand(pods(1, cpu_m=1500, prefix="q"), [])
    assert plan_demand(demand.model_copy(deep=True), [g], CAT, [request]).pods_covered == 1
    ds = daemonset_shapes([daemonset("agent", "1000m")])
    plan = plan_demand(demand.model_copy(update={"daemonsets": ds}, deep=True), [g], CAT, [request])
    assert plan.pods_covered == 0 and len(plan.new_nodes) == 1


def test_a_pod_that_only_fits_without_the_daemonsets_is_never_satisfiable_and_says_why() -> None:
    g = group("g", [(["cx22"], 10)])
    ds = daemonset_shapes([daemonset("agent", "500m")])
    demand = observe_demand(pods(1, cpu_m=1800), []).model_copy(update={"daemonsets": ds})
    plan = plan_demand(demand, [g], CAT, [])
    assert [p.reason for p in plan.problems] == ["NeverSatisfiable"]
    assert "after DaemonSets" in plan.problems[0].message
