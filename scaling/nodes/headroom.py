"""Headroom (prewarming): `spec.headroom` keeps that much room free in a node group at all times.

The semantics are those of the overprovisioning pattern (a low-priority placeholder Deployment
that real pods preempt), without the placeholder: the headroom is one *virtual* pending pod per
group that asks for exactly `spec.headroom` (cpu, memory, pod slots; one slot by default).

- It lands only in its group: its nodeSelector is the group label every node of the group
  carries (`node_labels_for` sets it last, so group labels cannot override it) and it tolerates
  exactly the group's taints. It does not tolerate the scale-down deletion taint, so a node on
  its way out never holds headroom.
- It is satisfied by the free room of a *single* Ready, schedulable node of the group, like a
  placeholder pod: 2 CPUs free spread as 1 + 1 over two nodes do not hold a 2-CPU headroom,
  because a 2-CPU pod could land on neither.
- The planner treats it like any pending pod: its step (a) leaves it to free room on an existing
  node (then nothing is asked), step (b) finds it covered by a request made for it or by the
  spare room of one in flight, and otherwise a node sized for it is planned. Real pending pods
  are placed first when they are larger, so pods that fill the room push the headroom onto a new
  node: after pods use the prewarmed node, another one is requested.
- Scale-down keeps a node whose removal would leave the group without a node holding the
  headroom (after the node's pods are moved), with the blocker code `Headroom`.

Virtual pods are not Kubernetes objects: the loop drops them from events, never-satisfiable
memory and the pod counts (`split_headroom`); their problems (e.g. a headroom no server type
can hold, or a group at maxNodes) are reported in the loop summary instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel

from scaling.kube.drain import Blocker
from scaling.kube.models import NodeInfo, PodInfo, Resources, Toleration
from scaling.kube.quantity import format_cpu, format_memory
from scaling.nodes.matching import pod_fits_node_shape
from scaling.nodes.models import LABEL_GROUP, NodeGroup, PodProblem, ScaleUpPlan

HEADROOM = "Headroom"  # the scale-down blocker code
UID_PREFIX = "headroom/"


def headroom_uid(group: str) -> str:
    return f"{UID_PREFIX}{group}"


def is_headroom(uid: str) -> bool:
    """A virtual pod's uid (real pod uids are UUIDs, never with a slash)."""
    return uid.startswith(UID_PREFIX)


def describe(r: Resources) -> str:
    return f"cpu={format_cpu(r.cpu_m)} memory={format_memory(r.memory)} pods={r.pods}"


def headroom_pod(group: NodeGroup) -> PodInfo | None:
    """The group's virtual pending pod, or None without headroom."""
    if group.headroom is None:
        return None
    return PodInfo(
        namespace="",
        name=headroom_uid(group.name),
        uid=headroom_uid(group.name),
        node_selector={LABEL_GROUP: group.name},
        tolerations=[
            Toleration(key=t.key, operator="Equal", value=t.value, effect=t.effect) for t in group.template_taints
        ],
        requests=group.headroom,
        unschedulable=True,
    )


def headroom_pods(groups: Iterable[NodeGroup]) -> list[PodInfo]:
    """One virtual pending pod per group with headroom, in name order (replays plan the same)."""
    return [p for g in sorted(groups, key=lambda g: g.name) if (p := headroom_pod(g)) is not None]


class HeadroomSplit(BaseModel):
    plan: ScaleUpPlan  # the plan as real pods see it (new nodes kept: they are real)
    problems: list[PodProblem]  # why some group's headroom could not be planned


def split_headroom(plan: ScaleUpPlan) -> HeadroomSplit:
    """Take the virtual pods out of a plan's pod lists and problems.

    What is left drives events, never-satisfiable memory, the loop summary and `may_scale_down`
    (a headroom that fits an existing node must not stop scale-down the way a pending pod does).
    Planned nodes stay, with the virtual uid in `pod_uids`: the next loops find the headroom
    covered by that request (planner step b), so it is asked for once."""
    covered = [u for u in plan.covered_in_flight if not is_headroom(u)]
    real = plan.model_copy(
        update={
            "fits_existing": [u for u in plan.fits_existing if not is_headroom(u)],
            "covered_in_flight": covered,
            # Virtual pods are always named (a shape of their own), so the named ones tell the count.
            "pods_covered": plan.pods_covered - (len(plan.covered_in_flight) - len(covered)),
            "pods_fit_existing": plan.pods_fit_existing - sum(1 for u in plan.fits_existing if is_headroom(u)),
            "problems": [p for p in plan.problems if not is_headroom(p.uid)],
        }
    )
    return HeadroomSplit(plan=real, problems=[p for p in plan.problems if is_headroom(p.uid)])


# -- scale-down ---------------------------------------------------------------------------------


def holds_headroom(node: NodeInfo, group: NodeGroup, used: Resources) -> bool:
    """Whether `node`'s free room (allocatable minus `used`) holds the group's headroom, with
    the planner's rules for free room: Ready, not cordoned, some room in every dimension, and
    labels and taints that admit the virtual pod."""
    pod = headroom_pod(group)
    if pod is None:
        return True
    room = node.allocatable - used
    if not node.ready or node.unschedulable or min(room.cpu_m, room.memory, room.pods) <= 0:
        return False
    return pod.requests.fits_in(room) and pod_fits_node_shape(pod, node.labels, node.taints, node.name)


def headroom_blocker(
    node: NodeInfo,
    groups: Mapping[str, NodeGroup],
    remaining: Sequence[NodeInfo],
    used: Mapping[str, Resources],
) -> Blocker | None:
    """A `Headroom` blocker when no node of `remaining` (the nodes that stay, `node` excluded)
    would hold the headroom of `node`'s group; `used` is what each holds once `node`'s pods moved."""
    group = groups.get(node.labels.get(LABEL_GROUP, ""))
    if group is None or group.headroom is None:
        return None
    for other in remaining:
        if other.name == node.name or other.labels.get(LABEL_GROUP) != group.name:
            continue
        if holds_headroom(other, group, used.get(other.name, Resources())):
            return None
    return Blocker(
        code=HEADROOM,
        message=f"group {group.name} keeps headroom {describe(group.headroom)} free; "
        f"without node {node.name} no node of the group would hold it",
    )
