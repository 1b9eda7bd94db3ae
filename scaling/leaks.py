"""Garbage collection of machines a provider holds but no Node or NodeRequest accounts for.

A machine leaks when its create succeeded at the provider but growth lost track of it (a lost
create response, a NodeRequest that gave up while the machine still booted, a worker crash
between create and record). Pure decision; an activity lists machines and deletes the result.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from scaling.models import LABEL_REQUEST

if TYPE_CHECKING:  # the model lives with the provider interface; scaling never imports activities
    from activities.providers.base import ProviderMachine

_LABEL_VALUE_MAX = 63
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_VALID = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?)?$")


def is_label_value(value: str) -> bool:
    """A value both Kubernetes and Hetzner accept as a label value."""
    return len(value) <= _LABEL_VALUE_MAX and bool(_VALID.match(value))


def label_value(raw: str) -> str:
    """A label-safe stand-in for `raw`: unchanged when already valid, else a readable prefix
    plus a hash of the original so distinct inputs stay distinct (workflow ids hold '/')."""
    if is_label_value(raw):
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
    prefix = _UNSAFE.sub("-", raw)[: _LABEL_VALUE_MAX - 11].strip("-_.")
    return f"{prefix}-{digest}" if prefix else digest


def request_key(request_id: str) -> str:
    """The label value a provider stores for a NodeRequest id."""
    return label_value(request_id)


def find_leaked_machines(
    machines: list[ProviderMachine],
    live_request_ids: set[str],
    node_provider_ids: set[str],
    now: float,
    grace_s: float,
) -> list[ProviderMachine]:
    """Machines older than grace_s that back no Node and belong to no live NodeRequest.

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
        request = m.labels.get(LABEL_REQUEST)
        if request is not None and request in live:
            continue
        leaked.append(m)
    return leaked
