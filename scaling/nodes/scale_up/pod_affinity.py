"""Required pod affinity and anti-affinity among the pods the planner places itself.

The filters (scaling.kube.scheduling) answer for running pods; what the planned pods do to
each other is decided here, before packing:
- a shape whose affinity only pending pods match waits for them (WaitingForAffinityTarget):
  nothing is bought for it until its target runs, then its filters say where it may go;
- the first pods of a self-affine group (nothing running matches, the pods match their own
  terms: the scheduler lets the first go anywhere) are planned together: on one node for a
  hostname term (as many as the largest admitting type holds; the rest could never join
  them), in one domain for a wider key;
- a shape whose anti-affinity selects itself on a key wider than a node takes one pod per
  domain its pools reach without a match (the rest are reported);
- a shape that needs a filter growth does not model (DynamicResources) is reported
  (NotModelled), never planned;
- shapes that repel each other on such a key are planned one at a time: the later (by key)
  waits for the earlier to be placed (WaitingForAntiAffinityTarget), so both are never
  planned into one domain. Shapes that repel each other on the hostname (or clash on host
  ports) never share a planned node (PodShape.conflicts; the packer keeps them apart).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scaling.kube.models import LABEL_HOSTNAME
from scaling.kube.scheduling.interpodaffinity import AFFINITY, ANTI_AFFINITY
from scaling.nodes.scale_up.demand import PodShape
from scaling.nodes.scale_up.topology import base_key, share_key

WAITING_FOR_AFFINITY = "WaitingForAffinityTarget"
WAITING_FOR_ANTI_AFFINITY = "WaitingForAntiAffinityTarget"
NEVER_SATISFIABLE = "NeverSatisfiable"
NOT_MODELLED = "NotModelled"

Problem = tuple[PodShape, str, str]  # shape (its pods), reason, message


def split_by_pod_affinity(
    shapes: Sequence[PodShape], domains: Callable[[PodShape, str], set[str]]
) -> tuple[list[PodShape], list[Problem], set[str]]:
    """The shapes to plan, the pods reported instead, and the keys of shapes whose pods go on
    one node together (a self-affine group's first pods). `domains(shape, key)`: the values of
    `key` on the next nodes of the pools that admit the shape."""
    pending = {base_key(s.key) for s in shapes if s.count > 0}
    out: list[PodShape] = []
    problems: list[Problem] = []
    together: set[str] = set()
    for d in shapes:
        if d.unmodelled:
            msg = (
                f"the pod needs the {', '.join(d.unmodelled)} filter, which growth does not model: "
                "no node is bought for it on a guess"
            )
            problems.append((d, NOT_MODELLED, msg))
            continue
        aff = d.scheduling.affinity if d.scheduling else None
        if aff is None or d.count <= 0:
            out.append(d)
            continue
        ahead = sorted(k for k in d.zone_conflicts if k in pending and k < base_key(d.key))
        if ahead:
            problems.append(
                (
                    d,
                    WAITING_FOR_ANTI_AFFINITY,
                    f"{ANTI_AFFINITY} with pending pods of shape {ahead[0]}: it is planned once they are placed",
                )
            )
            continue
        if aff.affinity and not aff.affinity_matched:
            targets = sorted(k for k in d.affinity_targets if k in pending)
            if not aff.self_affine:
                if targets:
                    problems.append(
                        (
                            d,
                            WAITING_FOR_AFFINITY,
                            f"{AFFINITY} until the pending pods it must join (shape {targets[0]}) are placed",
                        )
                    )
                    continue
                out.append(d)  # no pod anywhere matches: every new node refuses it (NeverSatisfiable)
                continue
            keys = {t.topology_key for t in aff.affinity}
            if LABEL_HOSTNAME in keys:
                together.add(d.key)
            else:
                d = _one_domain(d, sorted(keys), domains)
        wide = [k for k in aff.self_anti if k != LABEL_HOSTNAME]
        if wide:
            shares, left = _one_per_domain(d, wide[0], domains(d, wide[0]))
            out.extend(shares)
            if left is not None:
                problems.append(left)
            continue
        out.append(d)
    return out, problems, together


def _one_domain(d: PodShape, keys: list[str], domains: Callable[[PodShape, str], set[str]]) -> PodShape:
    """A self-affine group's first pods, all in one domain per key (the first by name)."""
    selector = dict(d.node_selector)
    for key in keys:
        found = sorted(domains(d.model_copy(update={"node_selector": selector}), key))
        if found:
            selector[key] = found[0]
    return d.model_copy(update={"node_selector": selector})


def _one_per_domain(d: PodShape, key: str, reachable: set[str]) -> tuple[list[PodShape], Problem | None]:
    pods = list(d.pods)
    shares = []
    for domain in sorted(reachable)[: d.count]:
        shares.append(
            d.model_copy(
                update={
                    "key": share_key(d.key, domain),
                    "node_selector": {**d.node_selector, key: domain},
                    "count": 1,
                    "pods": pods[:1],
                }
            )
        )
        del pods[:1]
    left = d.count - len(shares)
    if left <= 0:
        return shares, None
    msg = (
        f"{ANTI_AFFINITY}: its pods repel each other on {key}, one per domain, and the matching pools "
        f"reach {len(reachable)} domain(s) without one ({', '.join(sorted(reachable)) or 'none'})"
    )
    return shares, (d.model_copy(update={"count": left, "pods": pods}), NEVER_SATISFIABLE, msg)
