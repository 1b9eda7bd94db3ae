"""A filter's answer when a node will not take a pod: which plugin, and the scheduler's words."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    plugin: str
    reason: str  # the plugin's own reason string, as the scheduler writes it in its events
    # UnschedulableAndUnresolvable: no preemption or change on this node would let the pod in.
    unresolvable: bool = False
