"""A region played forward with the pure rules only (placement, evaluation, re-check), as the
FleetAutoscaler applies them: a burst arrives, then goes away. While demand only falls, no
cluster is ever created again (no flapping), and every instance finds a cluster."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.fleet.capacity import TypeRules
from scaling.fleet.evaluation import evaluate_region
from scaling.fleet.models import ClusterPhase, ClusterRecord, ManagedInstance
from scaling.fleet.placement import place_instance
from scaling.fleet.scale_down import removal_decision


@dataclass
class Region:
    rules: TypeRules
    cluster_units: int
    clusters: list[ClusterRecord] = field(default_factory=list)
    instances: dict[str, ManagedInstance] = field(default_factory=dict)
    created: int = 0
    removed: int = 0
    seq: int = 0

    def tick(self) -> None:
        """One autoscaler round: new clusters come up, waiting instances are placed, marked
        clusters are re-checked, then the rules are asked."""
        for c in self.clusters:
            if c.phase == ClusterPhase.ACCEPTED:
                c.phase, c.types[self.rules.instance_type].max_units = ClusterPhase.READY, self.cluster_units
        for inst in self.instances.values():
            if not inst.cluster_id:
                cid = place_instance(inst, self.clusters, self.rules)
                if cid:
                    rec = next(c for c in self.clusters if c.id == cid)
                    rec.types[inst.instance_type].consumed_units += inst.units
                    rec.instances += 1
                    inst.cluster_id = cid
        for c in list(self.clusters):
            if c.phase == ClusterPhase.DEPROVISIONING:
                if removal_decision(c, self.clusters, self.rules, rechecking=True).removable:
                    self.clusters.remove(c)
                    self.removed += 1
                else:
                    c.phase = ClusterPhase.READY
        ev = evaluate_region(self.clusters, {self.rules.instance_type: self.rules})
        for _ in ev.scale_up_types():
            self.seq += 1
            self.clusters.append(ClusterRecord(id=f"c{self.seq}", instance_type=self.rules.instance_type))
            self.created += 1
        for cid in ev.removals():
            next(c for c in self.clusters if c.id == cid).phase = ClusterPhase.DEPROVISIONING

    def delete(self, iid: str) -> None:
        inst = self.instances.pop(iid)
        for c in self.clusters:
            if c.id == inst.cluster_id:
                c.types[inst.instance_type].consumed_units -= inst.units
                c.instances -= 1

    def waiting(self) -> int:
        return sum(1 for i in self.instances.values() if not i.cluster_id)


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3), min_size=1, max_size=40),
    cluster_units=st.integers(3, 15),
    slack=st.integers(0, 8),
    order=st.randoms(use_true_random=False),
)
def test_burst_then_decline_never_flaps(sizes: list[int], cluster_units: int, slack: int, order) -> None:  # type: ignore[no-untyped-def]
    rules = TypeRules(instance_type="standard", limit=None, slack=slack, biggest_units=3, expected_units=cluster_units)
    region = Region(rules=rules, cluster_units=cluster_units)
    for i, units in enumerate(sizes):
        region.instances[f"k{i}"] = ManagedInstance(id=f"k{i}", instance_type="standard", size=f"x{units}", units=units)
    for _ in range(len(sizes) + 5):
        region.tick()
    assert region.waiting() == 0  # the burst is placed
    peak = region.created
    ids = list(region.instances)
    order.shuffle(ids)
    for iid in ids:
        region.delete(iid)
        region.tick()
        assert region.created == peak, "a cluster was created while demand only fell"
    for _ in range(5):
        region.tick()
    assert region.created == peak
    # What is left is what the rules keep for an empty region: no flapping, and nothing idle
    # beyond what a dry run of the scale-up rule needs.
    assert 1 <= len(region.clusters) <= peak
    assert all(c.phase == ClusterPhase.READY and c.instances == 0 for c in region.clusters)
    assert not any(removal_decision(c, region.clusters, rules).removable for c in region.clusters)
