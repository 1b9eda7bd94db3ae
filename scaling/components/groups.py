"""Bookkeeping between what the cluster holds and what the workflow remembers, and the
inputs the sources need (PD's strategy, capacity shapes, metric cluster map).

The objects found by label are the truth: a group created by a run that died before recording
it is adopted under its (deterministic) name, a record whose object is gone is dropped.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from scaling.components.contracts import (
    AutoClusterView,
    PdComponentRule,
    PdResource,
    PdRule,
    PdStorageRule,
    PdStrategy,
    Shape,
)
from scaling.components.plan import HOMOGENEOUS, RESOURCE_TYPE_LABEL, Group
from scaling.components.spec import DEFAULT_CPU_MIN_THRESHOLD, AutoscalerSpec, ComponentSpec
from scaling.components.state import GroupRecord
from scaling.kube.quantity import memory_bytes


class Reconciled(BaseModel):
    records: dict[str, GroupRecord] = Field(default_factory=dict)
    groups: list[Group] = Field(default_factory=list)  # what the planner sees
    drained: list[GroupRecord] = Field(default_factory=list)  # at 0 replicas and no pods: delete
    adopted: list[str] = Field(default_factory=list)
    vanished: list[str] = Field(default_factory=list)


def reconcile(records: dict[str, GroupRecord], found: list[AutoClusterView]) -> Reconciled:
    out = Reconciled()
    seen = set()
    for item in sorted(found, key=lambda i: i.name):
        seen.add(item.name)
        rec = records.get(item.name)
        if rec is None:
            rec = GroupRecord(
                name=item.name,
                group=item.group,
                resource_type=item.labels.get(RESOURCE_TYPE_LABEL) or item.group,
                replicas=item.component.replicas,
                phase="draining" if item.component.replicas == 0 else "active",
            )
            out.adopted.append(item.name)
        rec = rec.model_copy(update={"uid": item.uid, "replicas": item.component.replicas})
        if item.deleting:
            continue  # on its way out: neither planned nor deleted again
        if rec.phase == "draining" and item.component.replicas == 0 and item.component.pods == 0:
            out.drained.append(rec)
            continue
        out.records[item.name] = rec
        out.groups.append(
            Group(
                name=item.name,
                group=rec.group,
                resource_type=rec.resource_type,
                replicas=item.component.replicas,
                labels=item.labels,
            )
        )
    out.vanished = sorted(set(records) - seen)
    return out


def metric_clusters(base_cluster: str, records: dict[str, GroupRecord]) -> dict[str, str]:
    """TidbCluster name -> group key for the metrics aggregation."""
    return {base_cluster: HOMOGENEOUS, **{name: rec.group or name for name, rec in records.items()}}


def capacity_shapes(spec: ComponentSpec, homogeneous: Shape) -> dict[str, Shape]:
    shapes = {HOMOGENEOUS: homogeneous}
    for name, res in spec.resources.items():
        shapes[name] = Shape(cpu_milli=res.cpu_milli, memory_bytes=res.memory_bytes)
    return shapes


def pd_strategy(spec: AutoscalerSpec) -> PdStrategy:
    """PD's /autoscaling request for every component that is not on an external recommender,
    with the rules translated as tidb-operator's autoRulesToStrategyRule does (cpu: both
    thresholds; storage: min_threshold = 1 - max_threshold, the share PD must see available).

    tidb-operator asks once per component; growth asks once for both, so a component PD has no
    plan for is left alone (`plan_from_pd`). Resource types are one namespace at PD; a name
    defined by both components keeps the first."""
    rules, resources = [], {}
    for _, cs in sorted(spec.components.items()):
        if cs.external is not None:
            continue
        cpu, storage = cs.rules.get("cpu"), cs.rules.get("storage")
        rules.append(
            PdComponentRule(
                component=cs.component,
                cpu_rule=PdRule(
                    max_threshold=cpu.max_threshold,
                    min_threshold=DEFAULT_CPU_MIN_THRESHOLD if cpu.min_threshold is None else cpu.min_threshold,
                    resource_types=cpu.resource_types,
                )
                if cpu
                else None,
                storage_rule=PdStorageRule(
                    min_threshold=1.0 - storage.max_threshold, resource_types=storage.resource_types
                )
                if storage
                else None,
            )
        )
        for name, res in cs.resources.items():
            resources.setdefault(
                name,
                PdResource(
                    resource_type=name,
                    cpu=res.cpu_milli,
                    memory=res.memory_bytes,
                    storage=_storage_bytes(res.storage),
                    count=res.count,
                ),
            )
    return PdStrategy(rules=rules, resources=list(resources.values()))


def _storage_bytes(text: str) -> int:
    return memory_bytes(text) if text else 0
