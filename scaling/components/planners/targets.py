"""Target replicas per TidbCluster of one component, as a planner changes them: every planner
starts from what stands and turns its targets into the plan's changes the same way."""

from __future__ import annotations

from scaling.components.plan import HOMOGENEOUS, Change, PlanInput, group_name
from scaling.components.spec import AutoResource


class Targets:
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

    def standing_group(self, resource_type: str, group: str = "") -> str | None:
        """A TidbCluster that already holds this resource type's group, whoever made it: the one
        labelled `group` when given (tidb-operator's syncPlans matches PD's plans to TidbClusters
        by the autoscaling-group label, not by name), else the first of the type. A group
        tidb-operator created with released PD (labels like `pd-auto-scaling-tikv-0`) is thus
        grown in place, as released PD grows it, never doubled by a second TidbCluster."""
        standing = [g for g in self.inp.groups if g.resource_type == resource_type and g.name in self.meta]
        if group:
            return next((g.name for g in standing if g.group == group), None)
        return min((g.name for g in standing), default=None)

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
