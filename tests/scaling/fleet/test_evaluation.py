"""A region's evaluation over every instance type."""

from __future__ import annotations

from scaling.fleet.capacity import TypeRules
from scaling.fleet.evaluation import evaluate_region
from scaling.fleet.models import ClusterPhase, ClusterRecord

RULES = {
    "standard": TypeRules(instance_type="standard", limit=None, slack=0, biggest_units=2, expected_units=10),
    "developer": TypeRules(instance_type="developer", limit=0, slack=0, biggest_units=1, expected_units=1),
}


def ready(cid: str, itype: str, max_units: int, consumed: int = 0) -> ClusterRecord:
    return ClusterRecord(
        id=cid, instance_type=itype, phase=ClusterPhase.READY, max_units=max_units,
        consumed_units=consumed, instances=1 if consumed else 0,
    )  # fmt: skip


def test_each_type_decided_on_its_own() -> None:
    ev = evaluate_region([ready("s1", "standard", 10, consumed=10)], RULES)
    assert ev.scale_up_types() == ["standard"]  # developer: limit 0
    assert ev.removals() == []


def test_one_removal_per_type_per_evaluation() -> None:
    cs = [ready("s1", "standard", 10, consumed=2), ready("s2", "standard", 10), ready("s3", "standard", 10)]
    ev = evaluate_region(cs, RULES)
    assert ev.scale_up_types() == [] and len(ev.removals()) == 1


def test_switches_turn_scaling_off() -> None:
    ev = evaluate_region([], RULES, scale_up_enabled=False)
    assert ev.scale_up_types() == []
    cs = [ready("s1", "standard", 10, consumed=2), ready("s2", "standard", 10)]
    assert evaluate_region(cs, RULES, scale_down_enabled=False).removals() == []
