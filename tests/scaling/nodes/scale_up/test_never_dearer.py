"""The planner's plan is never dearer than Cluster Autoscaler (price, least-waste) or Karpenter
(at launch, after consolidation) on generated workloads, and every planned node holds its pods."""

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench.baselines import cluster_autoscaler, karpenter
from bench.plan_scale_up import plan_cost
from bench.workload import MIB, POOL_TYPES, PROVIDER, node_group
from scaling.kube.models import PodInfo, PodSpread, Resources
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.providers.kwok import kwok_catalogue

CAT = catalogue_index(kwok_catalogue(PROVIDER))
TYPES = [CAT[(PROVIDER, t)] for t in POOL_TYPES]
GROUP = node_group()
ROOM = {p.name: CAT[(p.provider, p.server_type.lower())].allocatable for p in flatten_pools(GROUP)}

# A shape: cpu millicores, memory MiB (both up to what cx52/ccx43 hold), pods, per-node limit.
shape = st.tuples(
    st.integers(50, 15000), st.integers(64, 28000), st.integers(1, 40), st.sampled_from([None, None, 1, 3])
)


def pods_of(shapes: list[tuple[int, int, int, int | None]]) -> list[PodInfo]:
    out = []
    for k, (cpu, mem, count, limit) in enumerate(shapes):
        spreads = [PodSpread(match_labels=(("app", f"s{k}"),), namespaces=("t",), limit=limit)] if limit else []
        out += [
            PodInfo(
                namespace="t",
                name=f"s{k}-{i}",
                uid=f"s{k}-{i}",
                labels={"app": f"s{k}"},
                requests=Resources(cpu_m=cpu, memory=mem * MIB, pods=1),
                spreads=spreads,
                unschedulable=True,
            )
            for i in range(count)
        ]
    return out


class _W:
    def __init__(self, pods: list[PodInfo]) -> None:
        self.group, self.catalogue, self.pods = GROUP, CAT, pods


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(shape, min_size=1, max_size=4))
# Found by this test, where filling one node at a time and repeating it stranded capped pods:
# 6 pods capped at 3 per node beside 5 uncapped ones (a cx22 and a cx33 where CA buys two cx22),
# and three capped shapes of one size (four cx22 where CA buys three).
@example([(50, 372, 6, 3), (50, 372, 5, None)])
@example([(59, 496, 7, 3), (59, 496, 1, 1), (59, 496, 6, 3)])
# Found by CI: cx33 (four 1455 MiB pods, one capped) + cx22 + cax31 (0.0368/h) where Karpenter's
# launch buys cax31 + two cx22 (0.0340/h): the cx33 was too full to empty and its capped pod had
# nowhere else to go; moving three 1455 MiB pods to the cax31 lets a cx22 hold the rest.
@example([(50, 64, 3, 1), (50, 1455, 2, None), (50, 1455, 2, None), (50, 6249, 1, None)])
def test_plan_is_never_dearer_than_a_baseline_and_every_node_holds_its_pods(shapes) -> None:
    from scaling.nodes.scale_up.planning import plan_scale_up

    pods = pods_of(shapes)
    plan = plan_scale_up(pods, [], [GROUP], CAT, [])
    assert not plan.problems
    by_uid = {p.uid: p for p in pods}
    assert sorted(u for n in plan.new_nodes for u in n.pod_uids) == sorted(by_uid)
    for n in plan.new_nodes:
        held = [by_uid[u] for u in n.pod_uids]
        room = ROOM[n.pool]
        assert sum(p.requests.cpu_m for p in held) <= room.cpu_m
        assert sum(p.requests.memory for p in held) <= room.memory
        assert len(held) <= room.pods
        for k, (*_, limit) in enumerate(shapes):
            assert limit is None or sum(1 for p in held if p.labels["app"] == f"s{k}") <= limit
    cost = plan_cost(_W(pods), plan)  # type: ignore[arg-type]
    for name, base in (
        ("ca price", cluster_autoscaler(pods, TYPES, "price")),
        ("ca least-waste", cluster_autoscaler(pods, TYPES, "least-waste")),
        ("karpenter", karpenter(pods, TYPES)),
        ("karpenter consolidated", karpenter(pods, TYPES, consolidate=True)),
    ):
        assert cost <= base * (1 + 1e-9), f"{cost:.4f}/h dearer than {name} {base:.4f}/h"
