"""Garbage collection of machines a provider holds but no Node or NodeRequest accounts for.

A machine leaks when its create succeeded at the provider but growth lost track of it (a lost
create response, a NodeRequest that gave up while the machine still booted, a worker crash
between create and record). Pure decision; an activity lists machines and deletes the result.
"""

from __future__ import annotations

from scaling.kube.labels import request_key
from scaling.nodes.adoption import CA_NODE_GROUP_LABEL
from scaling.nodes.contracts import ProviderMachine
from scaling.nodes.models import LABEL_REQUEST


def find_leaked_machines(
    machines: list[ProviderMachine],
    live_request_ids: set[str],
    node_provider_ids: set[str],
    now: float,
    grace_s: float,
) -> list[ProviderMachine]:
    """Machines older than grace_s that back no Node and belong to no live NodeRequest, nor
    to a Cluster Autoscaler group growth adopted.

    A machine without a known creation time is never reported: deleting is irreversible and
    its age cannot be judged. Request labels match either the raw id or its label-safe key.
    """
    live = set(live_request_ids) | {request_key(r) for r in live_request_ids}
    leaked: list[ProviderMachine] = []
    for m in machines:
        if m.created_at is None or now - m.created_at < grace_s:
            continue
        if m.provider_id and m.provider_id in node_provider_ids:
            continue
        if CA_NODE_GROUP_LABEL in m.labels:
            continue  # made by Cluster Autoscaler for a group growth adopted (scaling.nodes.adoption)
        request = m.labels.get(LABEL_REQUEST)
        if request is not None and request in live:
            continue
        leaked.append(m)
    return leaked
