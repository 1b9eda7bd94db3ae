"""The scale-down fits as the scheduler takes the moved pods (scaling.nodes.scale_down.arrivals): the
shortcut that spares an evaluation the play never answers otherwise than the play would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.kube.models import Resources
from scaling.kube.scheduling.arrivals import stranded
from scaling.nodes.scale_down import arrivals
from scaling.nodes.scale_down.arrivals import nominated, placed_anyway, target
from scaling.nodes.scale_down.checks import can_land
from tests.scaling.nodes.scale_down.test_candidates import GI, node, pod

SIZES = [(250, GI // 2), (500, 3 * GI), (1000, 2 * GI), (2000, 4 * GI)]  # the consolidation bench's families


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list, list, list, dict]:
    """A node ``x`` to remove with 1-4 pods, and 1-4 cx32-sized nodes partly full, some labelled for a
    pod's nodeSelector."""
    movers = [
        pod(f"m{i}", None, cpu=c, mem=m, node_selector={"zone": "a"} if draw(st.booleans()) else {})
        for i, (c, m) in enumerate(draw(st.lists(st.sampled_from(SIZES), min_size=1, max_size=4)))
    ]
    targets, on, used = [], {}, {}
    for i in range(draw(st.integers(1, 4))):
        name = f"t{i}"
        labels = {"zone": "a"} if draw(st.booleans()) else {}
        targets.append(node(name, cpu=3920, mem=6 * GI, group=None, labels=labels))
        on[name] = [
            pod(f"{name}-{j}", name, cpu=c, mem=m)
            for j, (c, m) in enumerate(draw(st.lists(st.sampled_from(SIZES), max_size=2)))
        ]
        used[name] = Resources.total(p.requests for p in on[name])
    return movers, targets, on, used


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_pods_placed_anyway_are_placed_in_every_order(cluster: tuple[list, list, list, dict]) -> None:
    movers, targets, on, used = cluster
    if placed_anyway(movers, [node("x"), *targets], used, leaving="x"):
        plays = [target(t, on[t.name], used[t.name]) for t in targets]
        assert stranded(movers, plays, can_land).stranded is None


def test_a_pod_with_too_few_nodes_to_go_to_needs_the_play() -> None:
    # Two pods and one node with room for either, not both: the play decides (and strands one).
    t = node("t", cpu=3920, mem=6 * GI, group=None)
    movers = [pod("a", None, cpu=500, mem=3 * GI), pod("b", None, cpu=500, mem=3 * GI)]
    used = {"t": Resources(cpu_m=0, memory=GI // 2, pods=0)}
    assert not placed_anyway(movers, [t], used, leaving="x")
    assert placed_anyway(movers[:1], [t], used, leaving="x")
    assert stranded(movers, [target(t, [], used["t"])], can_land).stranded is not None


def test_pods_about_to_land_go_to_the_node_the_scheduler_scores_best_then_first_fit(monkeypatch) -> None:  # noqa: ANN001
    # a is half full, b empty: the scheduler binds the first pod to b (first fit would take a), then
    # each to the emptier one; no node takes more than its room.
    a, b = node("a", cpu=2000, mem=4 * GI), node("b", cpu=2000, mem=4 * GI)
    staying = [pod("s", "a", cpu=1000, mem=GI)]
    waiting = [pod(f"w{i}", None, cpu=600, mem=GI // 2) for i in range(3)]
    assert nominated(waiting, [a, b], staying) == {"default/w0": "b", "default/w1": "b", "default/w2": "a"}
    # Past the work bound (two nodes scored per pod: one pod's worth), the rest go first fit by name,
    # from the room the scored ones left: the largest (w9) scored to b, w0 first fit to a, and w1 and
    # w2 fit nowhere then (no node takes more than its room).
    monkeypatch.setattr(arrivals, "NOMINATION_WORK", 2)
    big = pod("w9", None, cpu=1900, mem=GI)
    assert nominated([*waiting, big], [a, b], staying) == {"default/w9": "b", "default/w0": "a"}
