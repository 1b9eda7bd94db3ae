"""The planner against the cluster double's scheduler, in process and on plain objects.

A loop as the autoscaler runs it, without Temporal or HTTP: the sim's scheduler (sim/kube/
scheduler.py, its own reading of the kube-scheduler's filters) places what it can; the pods it
leaves Unschedulable are observed as the worker observes them (scaling.kube pods/nodes,
observe_demand) and planned (plan_demand); every planned node is created Ready as the KWOK
provider makes it (labels from node_labels_for, the type's allocatable), and the scheduler runs
again; until a round plans nothing. Then the two claims of issue 29 are read off the end state:
- a node bought for the pending pods received at least one of them (see plan_round), else it
  is wasted;
- a pod still Pending is reported by the planner (a problem with a reason), else unreported.
"""

from __future__ import annotations

from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

from scaling.kube.models import LABEL_HOSTNAME
from scaling.kube.nodes import node_info
from scaling.kube.pods import counts_as_demand, pod_info
from scaling.kube.scheduling.cluster import Cluster
from scaling.kube.scheduling.volumes import volumes_from
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.matching import node_allocatable, node_labels_for
from scaling.nodes.models import NodeGroup, ServerType
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_up.demand import observe_demand
from scaling.nodes.scale_up.planning import plan_demand
from sim.kube.control import FakeControl
from sim.kube.scheduler import Scheduler
from sim.kube.store import Store

Obj = dict[str, Any]
READY = [{"type": "Ready", "status": "True"}]
MAX_ROUNDS = 8


@dataclass
class Outcome:
    bought: dict[str, set[str]] = field(default_factory=dict)  # node -> uids of the pods it was bought for
    placed: dict[str, str] = field(default_factory=dict)  # pod uid -> node
    reported: dict[str, str] = field(default_factory=dict)  # pod uid -> the planner's reason
    messages: dict[str, str] = field(default_factory=dict)  # pending pod uid -> the scheduler's message
    names: dict[str, str] = field(default_factory=dict)  # pod uid -> namespace/name
    rounds: int = 0

    @property
    def wasted(self) -> list[str]:
        """Nodes that received none of the pods they were bought for."""
        return sorted(n for n, uids in self.bought.items() if not any(self.placed.get(u) == n for u in uids))

    @property
    def converged(self) -> bool:
        """The loop stopped buying before its last round."""
        return self.rounds < MAX_ROUNDS

    @property
    def unreported(self) -> list[str]:
        """Pods Pending at the end that the planner gave no reason for."""
        return sorted(u for u in self.messages if u not in self.reported)

    def explain(self) -> str:
        lines = [f"rounds={self.rounds} wasted={self.wasted} unreported={[self.names[u] for u in self.unreported]}"]
        for node, uids in sorted(self.bought.items()):
            got = sorted(self.names[u] for u, n in self.placed.items() if n == node)
            lines.append(f"  bought {node} for {sorted(self.names[u] for u in uids)}; it runs {got}")
        for uid, message in sorted(self.messages.items()):
            lines.append(f"  pending {self.names[uid]}: {message} | planner: {self.reported.get(uid, '-')}")
        return "\n".join(lines)


def kwok_node(name: str, group: NodeGroup, pool_name: str, types: dict[tuple[str, str], ServerType]) -> Obj:
    """The Node the KWOK provider would write for a node of this pool, Ready."""
    pool = next(p for p in flatten_pools(group) if p.name == pool_name)
    stype = types[(pool.provider, pool.server_type.lower())]
    alloc = node_allocatable(pool, stype)
    quantities = {"cpu": f"{alloc.cpu_m}m", "memory": str(alloc.memory), "pods": str(alloc.pods)}
    quantities.update({k: str(q) for k, q in alloc.extended})
    labels = {**node_labels_for(group, pool, stype), LABEL_HOSTNAME: name}
    return {
        "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": [t.model_dump() for t in group.taints]},
        "status": {"capacity": quantities, "allocatable": quantities, "conditions": READY},
    }


class Loop:
    def __init__(
        self,
        groups: Sequence[NodeGroup],
        *,
        nodes: Sequence[Obj] = (),
        objects: Sequence[tuple[str, str, Obj]] = (),
        catalogue: Sequence[ServerType] | None = None,
    ) -> None:
        """`objects`: (plural, namespace, body) created first (namespaces, PVs, claims, classes)."""
        self.groups = list(groups)
        self.catalogue = catalogue_index(list(catalogue if catalogue is not None else kwok_catalogue()))
        self.store = Store()
        for plural, ns, body in objects:
            group = "storage.k8s.io" if plural == "storageclasses" else ""
            self.store.create(self.store.builtin(plural, group), ns, deepcopy(body))
        for node in nodes:
            self.store.create(self.store.builtin("nodes"), "", deepcopy(node))
        self.scheduler = Scheduler(self.store, FakeControl(pod_initial_backoff=0.0, pod_max_backoff=0.0))
        self.outcome = Outcome()

    def add_pods(self, pods: Sequence[Obj]) -> None:
        for pod in pods:
            self.store.create(self.store.builtin("pods"), pod["metadata"].get("namespace") or "default", deepcopy(pod))

    def schedule(self) -> None:
        """Passes until one binds nothing (the scheduler retries a pod when another was placed)."""
        while self.scheduler.schedule_once():
            pass

    def run(self) -> Outcome:
        out = self.outcome
        for out.rounds in range(1, MAX_ROUNDS + 1):
            self.schedule()
            if not self.plan_round():
                break
        self.schedule()
        pods = self.store.all(self.store.builtin("pods"))
        for pod in pods:
            uid = pod["metadata"]["uid"]
            out.names[uid] = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            if node := pod["spec"].get("nodeName"):
                out.placed[uid] = node
            else:
                condition = next((c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"), {})
                out.messages[uid] = condition.get("message", "not tried")
        return out

    def plan_round(self) -> int:
        """Observe, plan, create what the plan buys (Ready at once); how many nodes it bought."""
        pods = self.store.all(self.store.builtin("pods"))
        nodes = self.store.all(self.store.builtin("nodes"))
        by_node: dict[str, list[Obj]] = {}
        for pod in pods:
            if name := pod["spec"].get("nodeName"):
                by_node.setdefault(name, []).append(pod)
        pending = [info for info in (pod_info(p) for p in pods) if info.unschedulable and counts_as_demand(info)]
        infos = [node_info(n, by_node.get(n["metadata"]["name"], [])) for n in nodes]
        cluster = Cluster(
            nodes=infos,
            pods={name: [pod_info(p) for p in on_node] for name, on_node in by_node.items()},
            namespaces={
                ns["metadata"]["name"]: ns["metadata"].get("labels") or {}
                for ns in self.store.all(self.store.builtin("namespaces"))
            },
            volumes=volumes_from(
                self.store.all(self.store.builtin("persistentvolumeclaims")),
                self.store.all(self.store.builtin("persistentvolumes")),
                self.store.all(self.store.builtin("storageclasses", "storage.k8s.io")),
            ),
        )
        demand = observe_demand(pending, infos, cluster=cluster)
        plan = plan_demand(demand, self.groups, self.catalogue, [])
        self.outcome.reported = {}
        by_shape = {s.key: [p.uid for p in s.pods] for s in demand.shapes}
        for problem in plan.problems:
            for uid in [problem.uid, *by_shape.get(problem.key.split("@")[0], [])]:
                self.outcome.reported[uid] = f"{problem.reason}: {problem.message}"
        group_by_name = {g.name: g for g in self.groups}
        # What the plan's nodes were bought for: the pods pending when it was made. The nodes of
        # one plan turn Ready together and the scheduler places the pending pods on them as its
        # scoring prefers (LeastAllocated spreads), not as the planner packed them, and a pod that
        # waited for its affinity target takes room the planner meant for another; a node that
        # runs none of the pending pods is one nobody needed.
        meant = {p.uid for p in pending}
        for planned in plan.new_nodes:
            name = f"{planned.pool}-{len(self.outcome.bought)}".lower()
            node = kwok_node(name, group_by_name[planned.group], planned.pool, self.catalogue)
            self.store.create(self.store.builtin("nodes"), "", node)
            self.outcome.bought[name] = meant
        return len(plan.new_nodes)
