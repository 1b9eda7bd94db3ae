"""Empty (seed 004): a growth node running only DaemonSet, mirror or finished pods. Selected at once and
tainted, it waits its unneeded time on a durable timer; a pod that lands on it meanwhile cancels it."""

from __future__ import annotations

from scaling.kube.drain import Blocker, pod_key, pods_to_evict
from scaling.nodes.disruption.models import DisruptionReason
from scaling.nodes.models import ScaleDownSettings
from scaling.nodes.scale_down.methods.base import Candidate, Wait
from scaling.nodes.scale_down.models import NodeState

NOT_EMPTY = "NodeNotEmpty"
CANCELLED_BY_PODS = "PodsLandedOnNode"  # what a cancelled Empty removal reports for NOT_EMPTY


class Empty:
    kind: str = NodeState.EMPTY.value
    wait = Wait.AFTER_SELECTION
    require_empty = True
    replaces = False
    min_saving: float | None = None
    reason: DisruptionReason | None = DisruptionReason.EMPTY

    def is_candidate(self, candidate: Candidate, settings: ScaleDownSettings) -> bool:
        return candidate.empty

    def why_not(self, candidate: Candidate, settings: ScaleDownSettings) -> Blocker:
        node = candidate.node.name
        names = ", ".join(pod_key(p) for p in pods_to_evict(node, candidate.pods))
        return Blocker(code=NOT_EMPTY, message=f"node {node} now runs pod {names}")

    def cancels(self, blockers: list[Blocker]) -> list[Blocker]:
        return list(blockers)


EMPTY = Empty()
