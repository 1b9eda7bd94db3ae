"""Seed 000's deletion evaluation (an empty cluster goes when the others still hold the biggest
size and the slack), and the no-flapping property: a scale-down never causes a scale-up in the
next evaluation."""

from __future__ import annotations

from hypothesis import given, settings

from scaling.fleet.capacity import TypeRules, ready_clusters, tally_capacity
from scaling.fleet.models import ClusterPhase, ClusterRecord
from scaling.fleet.scale_down import RemovalReason, cluster_to_remove, removal_decision
from scaling.fleet.scale_up import scale_up_needed
from tests.scaling.fleet.strategies import clusters, rules

STD = TypeRules(instance_type="standard", limit=None, slack=0, biggest_units=2, expected_units=10)


def ready(cid: str, max_units: int | None = 10, consumed: int = 0) -> ClusterRecord:
    return ClusterRecord(
        id=cid, instance_type="standard", phase=ClusterPhase.READY, max_units=max_units,
        consumed_units=consumed, instances=1 if consumed else 0,
    )  # fmt: skip


def test_empty_cluster_with_spare_capacity_elsewhere_is_removable() -> None:
    cs = [ready("a", consumed=5), ready("b")]
    d = cluster_to_remove(cs, STD)
    assert d is not None and d.cluster_id == "b" and d.removable


def test_the_only_cluster_is_never_removed() -> None:
    # Without it nothing could hold the biggest size: the dry run says scale up.
    d = removal_decision(ready("a"), [ready("a")], STD)
    assert not d.removable and d.reason == RemovalReason.WOULD_SCALE_UP
    assert cluster_to_remove([ready("a")], STD) is None


def test_not_empty_is_kept() -> None:
    cs = [ready("a", consumed=1), ready("b")]
    assert removal_decision(cs[0], cs, STD).reason == RemovalReason.NOT_EMPTY


def test_slack_keeps_an_empty_cluster() -> None:
    slack = STD.model_copy(update={"slack": 8})
    cs = [ready("a", consumed=5), ready("b")]  # without b, free 5 < 8
    assert removal_decision(cs[1], cs, slack).reason == RemovalReason.WOULD_SCALE_UP
    assert cluster_to_remove(cs, slack) is None


def test_not_yet_ready_clusters_do_not_cover_a_removal() -> None:
    provisioning = ClusterRecord(id="p", instance_type="standard", phase=ClusterPhase.PROVISIONING)
    cs = [ready("b"), provisioning]
    assert removal_decision(cs[0], cs, STD).reason == RemovalReason.WOULD_SCALE_UP


def test_blocked_cluster_is_kept() -> None:
    cs = [ready("a"), ready("b").model_copy(update={"deletion_blocked": True})]
    assert removal_decision(cs[1], cs, STD).reason == RemovalReason.BLOCKED
    d = cluster_to_remove(cs, STD)
    assert d is not None and d.cluster_id == "a"


def test_recheck_while_deprovisioning() -> None:
    gone = ready("b").model_copy(update={"phase": ClusterPhase.DEPROVISIONING})
    assert removal_decision(gone, [ready("a"), gone], STD, rechecking=True).removable
    busy = ready("b", consumed=1).model_copy(update={"phase": ClusterPhase.DEPROVISIONING})
    assert removal_decision(busy, [ready("a"), busy], STD, rechecking=True).reason == RemovalReason.NOT_EMPTY
    assert removal_decision(gone, [gone], STD, rechecking=True).reason == RemovalReason.WOULD_SCALE_UP


def test_limit_reached_allows_removal() -> None:
    # Nothing more may be placed in the region: an empty cluster is of no use.
    limited = STD.model_copy(update={"limit": 5})
    cs = [ready("a", consumed=5), ready("b")]
    assert removal_decision(cs[1], cs, limited).removable


@settings(max_examples=300)
@given(clusters(), rules())
def test_a_scale_down_never_causes_a_scale_up_in_the_next_evaluation(cs: list[ClusterRecord], r: TypeRules) -> None:
    for c in cs:
        d = removal_decision(c, cs, r)
        if not d.removable:
            continue
        after = [x.model_copy(update={"phase": ClusterPhase.DEPROVISIONING}) if x.id == c.id else x for x in cs]
        assert not scale_up_needed(after, r).needed


@given(clusters(), rules())
def test_fast_choice_agrees_with_the_full_dry_run(cs: list[ClusterRecord], r: TypeRules) -> None:
    chosen = cluster_to_remove(cs, r)
    removable = {c.id for c in cs if removal_decision(c, cs, r).removable}
    if chosen is None:
        assert not removable
    else:
        assert chosen.removable and chosen.cluster_id in removable


@given(clusters(), rules())
def test_tally_without_equals_tally_of_the_rest(cs: list[ClusterRecord], r: TypeRules) -> None:
    whole = tally_capacity(cs, r)
    for c in cs:
        if c.instance_type != r.instance_type:
            continue
        assert whole.without(c, r) == tally_capacity([x for x in cs if x.id != c.id], r)


@given(clusters(), rules())
def test_only_empty_ready_unblocked_clusters_are_removable(cs: list[ClusterRecord], r: TypeRules) -> None:
    for c in cs:
        if c.instance_type == r.instance_type and removal_decision(c, cs, r).removable:
            assert c in ready_clusters(cs, r.instance_type) and c.instances == 0 and not c.deletion_blocked
