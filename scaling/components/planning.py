"""Seed 002's algorithm as a pure function: one component's metrics -> target replicas.

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
Alternative sources (PD's /autoscaling, an external recommender) give target replicas, and
`plan_from_pd` / `plan_from_external` turn them into the same kind of plan.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from scaling.components.contracts import ComponentMetrics, GroupMetrics, PdPlan, Shape
from scaling.components.naming import auto_cluster_name
from scaling.components.spec import AutoResource, ComponentSpec

HOMOGENEOUS = ""  # group key and capacity key of the base cluster's instances
EXTERNAL_GROUP = "external"
PD_GROUP_PREFIX = "pd-auto-scaling"  # PD's group label prefix; growth's own groups use it too
GROUP_LABEL = "group"
RESOURCE_TYPE_LABEL = "resource-type"
SPECIAL_USE_LABEL = "specialUse"
HOT_REGION = "hotRegion"
EPS = 1e-9

Direction = Literal["out", "in"]


class Group(BaseModel):
    """One heterogeneous group as it stands (its TidbCluster exists, maybe at 0 replicas)."""

    name: str  # auto-<hash>
    group: str  # tidb.pingcap.com/autoscaling-group
    resource_type: str
    replicas: int
    labels: dict[str, str] = Field(default_factory=dict)


class PlanInput(BaseModel):
    namespace: str
    autoscaler: str
    base_cluster: str
    spec: ComponentSpec
    homogeneous_replicas: int
    homogeneous_shape: Shape  # the base cluster's cpu/memory requests
    base_cpu: str = ""  # quantity text of the base requests (external groups copy them)
    base_memory: str = ""
    base_storage: str = ""
    groups: list[Group] = Field(default_factory=list)
    metrics: ComponentMetrics | None = None
    # How many more of each shape the nodes hold (keys: HOMOGENEOUS, resource types); None or
    # a missing key: unknown, treated as unlimited.
    fits: dict[str, int] | None = None
    growth_manages_nodes: bool = False
    # False only to replay runs recorded before the `tidb-operator-parity` patch: scale-outs
    # round up to the midpoint, PD's answer drains a component it has no plan for, and an
    # external recommendation counts the homogeneous instances.
    upstream_parity: bool = True


class Change(BaseModel):
    """Set one TidbCluster's replicas for this component (create it first if missing)."""

    cluster: str  # base cluster or auto-<hash>
    group: str  # HOMOGENEOUS or the group label
    direction: Direction
    from_replicas: int
    to_replicas: int
    create: bool = False  # the auto cluster does not exist yet
    resource_type: str = ""
    cpu: str = ""
    memory: str = ""
    storage: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    reason: str = ""


class Headroom(BaseModel):
    """Instances that need nodes the cluster does not have (for the node loop / an operator)."""

    resource_type: str  # HOMOGENEOUS or a resource type
    shape: Shape
    count: int
    reason: str


class ComponentPlan(BaseModel):
    component: str
    changes: list[Change] = Field(default_factory=list)
    headroom: list[Headroom] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def target(self, cluster: str) -> int | None:
        for c in self.changes:
            if c.cluster == cluster:
                return c.to_replicas
        return None


# ---- helpers ---------------------------------------------------------------------------------
def group_labels(component: str, resource_type: str) -> dict[str, str]:
    """growth's own group labels (the same PD gives a group, so the two planners agree)."""
    labels = {GROUP_LABEL: f"{PD_GROUP_PREFIX}-{component}-{resource_type}", RESOURCE_TYPE_LABEL: resource_type}
    if component == "tikv":
        labels[SPECIAL_USE_LABEL] = HOT_REGION
    return labels


def group_name(inp: PlanInput, resource: AutoResource, labels: dict[str, str] | None) -> str:
    return auto_cluster_name(
        inp.namespace, inp.autoscaler, inp.spec.component, resource.cpu, resource.memory, resource.storage, labels
    )


def _ceil(x: float) -> int:
    return max(0, math.ceil(x - EPS))


def below_target(used: float, capacity: float, per_instance: float, target: float, strict: bool = True) -> int:
    """The fewest instances of `per_instance` that bring used/capacity strictly below `target`
    (seed 002: the new average is lower than the midpoint; landing on it would leave the next
    reading one jitter away from another scale-out). strict=False: at or below (before the
    parity patch)."""
    if not strict:
        return _ceil((used / target - capacity) / per_instance) if per_instance > 0 and target > 0 else 0
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


class _Targets:
    """Target replicas per cluster, starting from what stands."""

    def __init__(self, inp: PlanInput) -> None:
        self.inp = inp
        self.current: dict[str, int] = {inp.base_cluster: inp.homogeneous_replicas}
        self.target: dict[str, int] = dict(self.current)
        self.meta: dict[str, Change] = {
            inp.base_cluster: Change(
                cluster=inp.base_cluster,
                group=HOMOGENEOUS,
                direction="out",
                from_replicas=inp.homogeneous_replicas,
                to_replicas=inp.homogeneous_replicas,
            )
        }
        self.reasons: dict[str, str] = {}
        for g in inp.groups:
            res = inp.spec.resources.get(g.resource_type)
            self.current[g.name] = g.replicas
            self.target[g.name] = g.replicas
            self.meta[g.name] = Change(
                cluster=g.name,
                group=g.group,
                direction="out",
                from_replicas=g.replicas,
                to_replicas=g.replicas,
                resource_type=g.resource_type,
                labels=g.labels,
                cpu=res.cpu if res else "",
                memory=res.memory if res else "",
                storage=res.storage if res else "",
            )

    def ensure_group(self, resource: AutoResource, labels: dict[str, str], group: str) -> str:
        name = group_name(self.inp, resource, labels)
        if name not in self.meta:
            self.current[name] = 0
            self.target[name] = 0
            self.meta[name] = Change(
                cluster=name,
                group=group,
                direction="out",
                from_replicas=0,
                to_replicas=0,
                create=True,
                resource_type=resource.name,
                cpu=resource.cpu,
                memory=resource.memory,
                storage=resource.storage,
                labels=labels,
            )
        return name

    def set(self, cluster: str, replicas: int, reason: str) -> None:
        self.target[cluster] = replicas
        self.reasons[cluster] = reason

    def drop_heterogeneous_scale_outs(self) -> list[str]:
        """Undo every heterogeneous scale-out planned so far (new groups included)."""
        dropped = []
        for name in self.meta:
            if name != self.inp.base_cluster and self.target[name] > self.current[name]:
                self.target[name] = self.current[name]
                self.reasons.pop(name, None)
                dropped.append(name)
        return dropped

    def of_type(self, resource_type: str) -> list[str]:
        return [n for n, c in self.meta.items() if n != self.inp.base_cluster and c.resource_type == resource_type]

    def changes(self) -> list[Change]:
        out = []
        for name, change in self.meta.items():
            before, after = self.current[name], self.target[name]
            if before == after:
                continue
            out.append(
                change.model_copy(
                    update={
                        "from_replicas": before,
                        "to_replicas": after,
                        "direction": "out" if after > before else "in",
                        "reason": self.reasons.get(name, ""),
                    }
                )
            )
        return sorted(out, key=lambda c: (c.direction != "in", c.cluster))


def _preference(spec: ComponentSpec, types: list[str]) -> list[AutoResource]:
    res = [spec.resources[t] for t in types if t in spec.resources]
    return sorted(res, key=lambda r: (-r.cpu_milli, -r.memory_bytes, r.name))


def _least_preferred_groups(inp: PlanInput, t: _Targets) -> list[str]:
    """Heterogeneous clusters with replicas, least preferred type first (smallest CPU)."""

    def key(name: str) -> tuple[int, int, str]:
        res = inp.spec.resources.get(t.meta[name].resource_type)
        return (res.cpu_milli if res else 0, res.memory_bytes if res else 0, name)

    return sorted((n for n in t.meta if n != inp.base_cluster and t.target[n] > 0), key=key)


# ---- the growth planner ----------------------------------------------------------------------
def plan_growth(inp: PlanInput) -> ComponentPlan:
    spec, plan = inp.spec, ComponentPlan(component=inp.spec.component)
    t = _Targets(inp)
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
            add_cpu = below_target(used, quota, hom_cpu, cpu_rule.target, inp.upstream_parity)
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
            add_storage = below_target(s_used, s_cap, per_storage, storage_rule.target, inp.upstream_parity)
            plan.notes.append(
                f"storage average {s_used / s_cap:.3f} > max {storage_rule.max_threshold}: +{add_storage} homogeneous"
            )

    add = max(add_cpu, add_storage)
    if add > 0:
        _homogeneous_out(inp, t, plan, add, used, quota, hom_cpu, cpu_rule, add_cpu >= add_storage)
    plan.changes = t.changes()
    return plan


def _enforce_counts(inp: PlanInput, t: _Targets) -> None:
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


def _heterogeneous_out(inp: PlanInput, t: _Targets, plan: ComponentPlan, types: list[str], need: float) -> None:
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
        exceed = math.floor(need / cores + EPS) + 1 if inp.upstream_parity else _ceil(need / cores)
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
    t: _Targets,
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
            add = max(add, below_target(used, quota - removed_quota, hom_cpu, cpu_rule.target, inp.upstream_parity))
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


# ---- other sources ---------------------------------------------------------------------------
def plan_from_pd(inp: PlanInput, plans: list[PdPlan]) -> ComponentPlan:
    """PD returns the full set of groups of a component it planned: each plan is a group's
    target; a standing group PD left out goes to 0. Counts are capped by the resource type's
    count. No plan at all for this component (PD answers nothing for a component within its
    thresholds, and growth asks once for both) changes nothing: it never drains the groups."""
    plan = ComponentPlan(component=inp.spec.component)
    if inp.upstream_parity and not any(p.component == inp.spec.component for p in plans):
        plan.notes.append(f"PD gave no plan for {inp.spec.component}: nothing changed")
        return plan
    t = _Targets(inp)
    wanted: set[str] = set()
    per_type: dict[str, int] = {}
    for p in plans:
        if p.component != inp.spec.component:
            continue
        res = inp.spec.resources.get(p.resource_type)
        if res is None:
            plan.notes.append(f"PD planned unknown resource type {p.resource_type!r}: ignored")
            continue
        labels = dict(p.labels)
        name = t.ensure_group(res, labels, labels.get(GROUP_LABEL) or p.resource_type)
        count = max(0, p.count)
        if res.count is not None:
            count = min(count, max(0, res.count - per_type.get(res.name, 0)))
        per_type[res.name] = per_type.get(res.name, 0) + count
        wanted.add(name)
        t.set(name, count, "PD's plan")
    for name in t.meta:
        if name != inp.base_cluster and name not in wanted and t.target[name] > 0:
            t.set(name, 0, "not in PD's plan")
    plan.changes = [c for c in t.changes() if not (c.create and c.to_replicas == 0)]
    return plan


def plan_from_external(inp: PlanInput, recommended: int) -> ComponentPlan:
    """The recommendation, capped at maxReplicas, is the external group's own replicas (as
    tidb-operator's syncExternal sets its `<cluster>-<component>-external` TidbCluster): one
    heterogeneous group copying the base cluster's requests (TiKV: specialUse hotRegion); the
    homogeneous instances are not counted against it. 0 scales the group to nothing."""
    plan = ComponentPlan(component=inp.spec.component)
    ext = inp.spec.external
    if ext is None:
        return plan
    t = _Targets(inp)
    extra = min(max(0, recommended), ext.max_replicas)
    if not inp.upstream_parity:
        extra = max(0, extra - inp.homogeneous_replicas)
    if recommended > ext.max_replicas:
        plan.notes.append(f"recommended {recommended} capped at maxReplicas {ext.max_replicas}")
    labels = {SPECIAL_USE_LABEL: HOT_REGION} if inp.spec.component == "tikv" else {}
    base = AutoResource(
        name=EXTERNAL_GROUP,
        cpu=inp.base_cpu,
        memory=inp.base_memory,
        storage=inp.base_storage if inp.spec.component == "tikv" else "",
        cpu_milli=inp.homogeneous_shape.cpu_milli,
        memory_bytes=inp.homogeneous_shape.memory_bytes,
    )
    name = group_name(inp, base, labels)
    if name in t.meta or extra > 0:
        name = t.ensure_group(base, labels, EXTERNAL_GROUP)
        t.set(name, extra, f"external recommendation {recommended}")
    plan.changes = t.changes()
    return plan
