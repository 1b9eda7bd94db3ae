"""An external recommender's answer as a component plan: the replicas of one external group."""

from __future__ import annotations

from scaling.components.plan import EXTERNAL_GROUP, HOT_REGION, SPECIAL_USE_LABEL, ComponentPlan, PlanInput, group_name
from scaling.components.planners.targets import Targets
from scaling.components.spec import AutoResource


def plan_from_external(inp: PlanInput, recommended: int) -> ComponentPlan:
    """The recommendation, capped at maxReplicas, is the external group's own replicas (as
    tidb-operator's syncExternal sets its `<cluster>-<component>-external` TidbCluster): one
    heterogeneous group copying the base cluster's requests (TiKV: specialUse hotRegion); the
    homogeneous instances are not counted against it. 0 scales the group to nothing."""
    plan = ComponentPlan(component=inp.spec.component)
    ext = inp.spec.external
    if ext is None:
        return plan
    t = Targets(inp)
    extra = min(max(0, recommended), ext.max_replicas)
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
