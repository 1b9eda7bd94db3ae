"""karpenter.sh/do-not-disrupt: "true" on a node, or on a pod running on it, holds the node from every
voluntary disruption (Empty and Underused removals, drift and expiry replacements, consolidation),
as Karpenter's pod- and node-level controls do. An operator's remove-now is not voluntary: it is
not held (Karpenter's manual `kubectl delete node` is not either). The pod annotation is ignored on
pods that go away with the node anyway (DaemonSet, mirror, finished) and on pods already being
deleted, as Karpenter ignores it on terminating, terminal, DaemonSet and static pods.
Cluster Autoscaler's annotations (safe-to-evict, scale-down-disabled) keep applying beside it.
"""

from __future__ import annotations

from scaling.kube.drain import Blocker, pod_key, stays_with_node
from scaling.kube.models import NodeInfo, PodInfo

ANNOTATION_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
DO_NOT_DISRUPT = "DoNotDisrupt"
EVENT_REASON = "DisruptionBlocked"  # Karpenter's Event reason on a node it may not disrupt


def _marked(annotations: dict[str, str]) -> bool:
    return annotations.get(ANNOTATION_DO_NOT_DISRUPT) == "true"


def do_not_disrupt_blockers(node: NodeInfo, pods: list[PodInfo]) -> list[Blocker]:
    """What holds ``node`` (``pods``: those on it) from voluntary disruption: the node's annotation,
    then one blocker per annotated pod that a drain would evict."""
    out: list[Blocker] = []
    if _marked(node.annotations):
        out.append(
            Blocker(code=DO_NOT_DISRUPT, message=f"node {node.name} has annotation {ANNOTATION_DO_NOT_DISRUPT}=true")
        )
    for p in pods:
        if (
            p.node_name == node.name
            and _marked(p.annotations)
            and not stays_with_node(p)
            and p.deletion_timestamp is None
        ):
            key = pod_key(p)
            out.append(
                Blocker(
                    code=DO_NOT_DISRUPT,
                    message=f"pod {key} has annotation {ANNOTATION_DO_NOT_DISRUPT}=true",
                    pod=key,
                )
            )
    return out
