"""The rules planner (seed 002's algorithm: scale out until use is under the thresholds' midpoint,
scale one heterogeneous instance in when every instance is under min) as a pure function: one
component's metrics -> target replicas.

Homogeneous instances are the base TidbCluster's; heterogeneous ones live in `auto-<hash>`
TidbClusters (one per group). Rules, per component:

- CPU, average over max: homogeneous scale-out so the average drops strictly below the rule's
  target ((max+min)/2): the fewest instances after which used/quota < target, never equal to it.
  Homogeneous instances are never scaled in, and never added past the spec's
  `maxHomogeneousReplicas`.
- CPU, average not over max but some instances over it: heterogeneous scale-out sized so those
  instances' share drops to the target; resource types by CPU descending, each up to its count.
- CPU, every instance under min: one heterogeneous instance is scaled in (the least preferred
  type's group first).
- Storage (TiKV): average used/capacity over max -> homogeneous scale-out to strictly below
  the target.
- When the nodes cannot hold a homogeneous scale-out and growth does not manage the nodes,
  heterogeneous instances are scaled in first to make room; whatever still does not fit is a
  headroom request in the plan (and, where growth manages the nodes, pending pods get nodes).
  A plan that makes room this way grows no heterogeneous group (the CPU hot-subset scale-out
  of the same round is dropped): it never shrinks and grows temporary instances at once.
- A resource type whose count was lowered below its groups' replicas is brought down to it.

Every change carries its direction; intervals are applied afterwards by `timing.gate`.
"""

from __future__ import annotations

import math

from scaling.components.contracts import ComponentMetrics, GroupMetrics, Shape
from scaling.components.plan import (
    GROUP_LABEL,
    HOMOGENEOUS,
    ComponentPlan,
    Headroom,
    PlanInput,
    group_labels,
)
from scaling.components.planners.targets import Targets
from scaling.components.spec import AutoResource, ComponentSpec

EPS = 1e-9


def _ceil(x: float) -> int:
    return max(0, math.ceil(x - EPS))


def below_target(used: float, capacity: float, per_instance: float, target: float) -> int:
    """The fewest instances of `per_instance` that bring used/capacity strictly below `target`
    (seed 002: the new average is lower than the midpoint; landing on it would leave the next
    reading one jitter away from another scale-out)."""
    if per_instance <= 0 or target <= 0 or (capacity > 0 and used / capacity < target):
        return 0
    n = _ceil((used / target - capacity) / per_instance)
    while used / (capacity + n * per_instance) >= target:  # floating point: step until strictly below
        n += 1
    return n


def _fit(inp: PlanInput, key: str) -> float:
    if inp.fits is None or key not in inp.fits:
        return math.inf
    return max(0, inp.fits[key])


def _by_key(metrics: ComponentMetrics | None) -> dict[str, GroupMetrics]:
    return {g.group: g for g in (metrics.groups if metrics else [])}


def _preference(spec: ComponentSpec, types: list[str]) -> list[AutoResource]:
    res = [spec.resources[t] for t in types if t in spec.resources]
    return sorted(res, key=lambda r: (-r.cpu_milli, -r.memory_bytes, r.name))


def _least_preferred_groups(inp: PlanInput, t: Targets) -> list[str]:
    """Heterogeneous clusters with replicas, least preferred type first (smallest CPU)."""

    def key(name: str) -> tuple[int, int, str]:
        res = inp.spec.resources.get(t.meta[name].resource_type)
        return (res.cpu_milli if res else 0, res.memory_bytes if res else 0, name)

    return sorted((n for n in t.meta if n != inp.base_cluster and t.target[n] > 0), key=key)


# ---- the growth planner ----------------------------------------------------------------------
def plan_growth(inp: PlanInput) -> ComponentPlan:
    spec, plan = inp.spec, ComponentPlan(component=inp.spec.component)
    t = Targets(inp)
    _enforce_counts(inp, t)
    metrics = inp.metrics
    if metrics is None or not metrics.groups:
        plan.notes.append("no metrics: nothing decided")
        plan.changes = t.changes()
        return plan
    groups = _by_key(metrics)
    used = sum(g.cpu_used for g in groups.values())
    quota = sum(g.cpu_quota for g in groups.values())
    instances = sum(g.instances for g in groups.values())
    expected = inp.homogeneous_replicas + sum(g.replicas for g in inp.groups)
    hom = groups.get(HOMOGENEOUS)
    cpu_rule, storage_rule = spec.rules.get("cpu"), spec.rules.get("storage")

    # Per-instance size of a homogeneous instance, as measured (or as requested).
    hom_cpu = hom.cpu_quota / hom.instances if hom and hom.instances else inp.homogeneous_shape.cpu_milli / 1000
    add_cpu = 0
    if cpu_rule and quota > 0:
        average = used / quota
        hot = sum(g.hot_instances for g in groups.values())
        if average > cpu_rule.max_threshold and hom_cpu > 0:
            add_cpu = below_target(used, quota, hom_cpu, cpu_rule.target)
            plan.notes.append(f"cpu average {average:.3f} > max {cpu_rule.max_threshold}: +{add_cpu} homogeneous")
        elif hot:
            hot_used = sum(g.hot_cpu_used for g in groups.values())
            hot_quota = sum(g.hot_cpu_quota for g in groups.values())
            need = hot_used / cpu_rule.target - hot_quota
            plan.notes.append(f"{hot} instance(s) over max {cpu_rule.max_threshold}: {need:.2f} cores heterogeneous")
            _heterogeneous_out(inp, t, plan, cpu_rule.resource_types, need)
        elif (
            cpu_rule.min_threshold is not None
            and instances >= expected
            and max(g.max_ratio for g in groups.values()) < cpu_rule.min_threshold
        ):
            victims = _least_preferred_groups(inp, t)
            if victims:
                name = victims[0]
                t.set(name, t.target[name] - 1, f"every instance under min {cpu_rule.min_threshold}")
                plan.notes.append(f"all cpu under min: one heterogeneous instance of {name} scaled in")

    add_storage, per_storage = 0, 0.0
    if storage_rule and spec.component == "tikv":
        s_used = sum(g.storage_used for g in groups.values())
        s_cap = sum(g.storage_capacity for g in groups.values())
        s_n = hom.storage_instances if hom else 0
        per_storage = hom.storage_capacity / s_n if hom and s_n else 0.0
        if s_cap > 0 and per_storage > 0 and s_used / s_cap > storage_rule.max_threshold:
            add_storage = below_target(s_used, s_cap, per_storage, storage_rule.target)
            plan.notes.append(
                f"storage average {s_used / s_cap:.3f} > max {storage_rule.max_threshold}: +{add_storage} homogeneous"
            )

    add = max(add_cpu, add_storage)
    if add > 0:
        _homogeneous_out(inp, t, plan, add, used, quota, hom_cpu, cpu_rule, add_cpu >= add_storage)
    plan.changes = t.changes()
    return plan


def _enforce_counts(inp: PlanInput, t: Targets) -> None:
    for res in inp.spec.resources.values():
        if res.count is None:
            continue
        over = sum(t.target[n] for n in t.of_type(res.name)) - res.count
        for name in sorted(t.of_type(res.name), reverse=True):
            if over <= 0:
                break
            cut = min(over, t.target[name])
            t.set(name, t.target[name] - cut, f"resource type {res.name} count is {res.count}")
            over -= cut


def _heterogeneous_out(inp: PlanInput, t: Targets, plan: ComponentPlan, types: list[str], need: float) -> None:
    spent_cpu = 0.0  # millicores placed so far: shared room, counted against later types
    for res in _preference(inp.spec, types):
        if need <= EPS:
            break
        cores = res.cpu_milli / 1000
        existing = sum(t.target[n] for n in t.of_type(res.name))
        available = math.inf if res.count is None else max(0, res.count - existing)
        room = _fit(inp, res.name)
        if room != math.inf:
            room = max(0, room - _ceil(spent_cpu / res.cpu_milli))
        # Strictly below the target: k * cores > need, so an exact fit takes one more.
        exceed = math.floor(need / cores + EPS) + 1
        wanted = min(exceed, available)
        short = wanted - min(wanted, room)
        if short > 0:
            plan.headroom.append(
                Headroom(
                    resource_type=res.name,
                    shape=Shape(cpu_milli=res.cpu_milli, memory_bytes=res.memory_bytes),
                    count=int(short),
                    reason="heterogeneous scale-out does not fit on the nodes",
                )
            )
        # Where growth manages the nodes, pending pods get nodes: plan what is wanted.
        k = int(wanted if inp.growth_manages_nodes else min(wanted, room))
        if k <= 0:
            continue
        labels = group_labels(inp.spec.component, res.name)
        name = t.ensure_group(res, labels, labels[GROUP_LABEL])
        t.set(name, t.target[name] + k, "instances over the cpu max threshold")
        need -= k * cores
        spent_cpu += k * res.cpu_milli
    if need > EPS:
        plan.notes.append(f"heterogeneous scale-out short by {need:.2f} cores (counts or nodes exhausted)")


def _homogeneous_out(
    inp: PlanInput,
    t: Targets,
    plan: ComponentPlan,
    add: int,
    used: float,
    quota: float,
    hom_cpu: float,
    cpu_rule,
    cpu_driven: bool,
) -> None:
    shape = inp.homogeneous_shape
    cap = inp.spec.max_homogeneous_replicas
    if cap is not None and t.target[inp.base_cluster] + add > cap:
        allowed = max(0, cap - t.target[inp.base_cluster])
        plan.notes.append(f"homogeneous scale-out of +{add} capped at maxHomogeneousReplicas {cap}: +{allowed}")
        add = allowed
        if add <= 0:
            return
    room = _fit(inp, HOMOGENEOUS)
    removed_quota = 0.0
    freed_cpu = freed_mem = 0
    # Where growth manages the nodes, pending pods get nodes: no instance is sacrificed.
    standing = [n for n in t.meta if n != inp.base_cluster and min(t.current[n], t.target[n]) > 0]
    if not inp.growth_manages_nodes and add > room and standing:
        # Heterogeneous instances are about to be scaled in because the nodes are full (seed
        # 002): growing other heterogeneous groups in the same plan would take the very room
        # being made (and shrink and grow temporary instances at once). The homogeneous
        # scale-out wins; the hot subset is looked at again next round.
        dropped = t.drop_heterogeneous_scale_outs()
        if dropped:
            plan.headroom = [h for h in plan.headroom if h.resource_type == HOMOGENEOUS]
            plan.notes.append(
                f"heterogeneous scale-out of {', '.join(sorted(dropped))} dropped: making room for a homogeneous one"
            )
    victims = [] if inp.growth_manages_nodes else _least_preferred_groups(inp, t)
    # Make room by scaling heterogeneous instances in, one at a time, while the need exceeds it.
    while add > room + _slots(freed_cpu, freed_mem, shape) and victims:
        name = victims[0]
        res = inp.spec.resources.get(t.meta[name].resource_type)
        t.set(name, t.target[name] - 1, "making room for a homogeneous scale-out")
        if res:
            freed_cpu += res.cpu_milli
            freed_mem += res.memory_bytes
            removed_quota += res.cpu_milli / 1000
        if t.target[name] == 0:
            victims.pop(0)
        if cpu_driven and cpu_rule and hom_cpu > 0:
            add = max(add, below_target(used, quota - removed_quota, hom_cpu, cpu_rule.target))
            if cap is not None:
                add = min(add, max(0, cap - t.target[inp.base_cluster]))
    placeable = room + _slots(freed_cpu, freed_mem, shape)
    grant = add if placeable == math.inf else int(min(add, placeable))
    if grant < add:
        plan.headroom.append(
            Headroom(
                resource_type=HOMOGENEOUS,
                shape=shape,
                count=add - grant,
                reason="homogeneous scale-out does not fit on the nodes",
            )
        )
    if inp.growth_manages_nodes:
        grant = add  # pending pods make the node loop add nodes
    if grant > 0:
        reason = "cpu average over max" if cpu_driven else "storage average over max"
        t.set(inp.base_cluster, t.target[inp.base_cluster] + grant, reason)


def _slots(cpu: int, mem: int, shape: Shape) -> float:
    if shape.cpu_milli <= 0 and shape.memory_bytes <= 0:
        return 0
    by_cpu = cpu // shape.cpu_milli if shape.cpu_milli > 0 else math.inf
    by_mem = mem // shape.memory_bytes if shape.memory_bytes > 0 else math.inf
    return min(by_cpu, by_mem)
