"""scale-down: the burst scales out, then the workload goes away and growth removes the nodes it
added (taint + ScaleDownAt, durable timer, re-check, drain, delete) until the pools are back at
their minimum. Short timers (the group's scaleDown settings) keep the demo quick."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from kubernetes import client

from scaling.nodes.models import LABEL_GROUP
from scaling.nodes.status import AutoscalerStatus
from starters.scenarios.burst import BurstScenario

if TYPE_CHECKING:
    from starters.scenarios.base import Demo

SCALE_DOWN = {"unneededTime": "4s", "delayAfterAdd": "8s", "utilizationThreshold": 0.5}
NOT_BLOCKING = {"Removing", "Utilized", "UnneededWaiting", "Empty", "Underused", "NotManaged"}


class BlockTally:
    """Distinct (node, reason) pairs that held a node, from the status query over time."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()

    def update(self, status: AutoscalerStatus) -> None:
        for c in status.candidates:
            if c.state == "Blocked" and c.reason:
                self.seen.add((c.node, c.reason))
        for sd in status.recent_scale_downs:
            if sd.phase.value in ("Cancelled", "Failed") and sd.reason:
                self.seen.add((sd.node, sd.reason))

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(reason for _, reason in self.seen).items()))


def evictions_refused(status: AutoscalerStatus) -> int:
    return sum(sd.evictions_refused for sd in status.recent_scale_downs) + sum(
        sd.evictions_refused for sd in status.scale_downs
    )


async def managed_nodes(demo: Demo) -> list[str]:
    nodes = await asyncio.to_thread(client.CoreV1Api(demo.api).list_node, label_selector=LABEL_GROUP)
    return sorted(n.metadata.name for n in nodes.items)


class ScaleDownScenario(BurstScenario):
    name = "scale-down"
    app = "burst"
    min_nodes = 0

    def node_groups(self) -> list[dict[str, Any]]:
        # The burst's groups, with short scale-down timers so the demo stays quick.
        groups = super().node_groups()
        for group in groups:
            group["spec"]["scaleDown"] = SCALE_DOWN
        return groups

    async def wait_nodes(self, demo: Demo, target: int, tally: BlockTally, t0: float) -> list[str]:
        deadline = t0 + self.args.timeout
        last_say = 0.0
        while True:
            status = await demo.status()
            tally.update(status)
            nodes = await managed_nodes(demo)
            if len(nodes) <= target and not status.scale_downs:
                return nodes
            if time.monotonic() - last_say > 3:
                phases = Counter(sd.phase.value for sd in status.scale_downs)
                print(
                    f"  nodes {len(nodes)} (target {target}); removals in progress {dict(phases)}; "
                    f"blocked {tally.counts()}",
                    flush=True,
                )
                last_say = time.monotonic()
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"still {len(nodes)} nodes after {self.args.timeout:.0f}s (target {target}); "
                    f"candidates: {[(c.node, c.state, c.reason) for c in status.candidates]}"
                )
            await asyncio.sleep(0.5)

    async def run(self, demo: Demo) -> dict[str, Any]:
        up = await self.scale_up(demo)
        peak = len(await managed_nodes(demo))
        t0 = time.monotonic()
        apps = client.AppsV1Api(demo.api)
        await asyncio.to_thread(apps.delete_namespaced_deployment, self.app, "default")
        tally = BlockTally()
        final = await self.wait_nodes(demo, self.min_nodes, tally, t0)
        status = await demo.status()
        return {
            **scale_down_summary(self.name, peak, final, status, tally, t0),
            "seconds_to_peak": up["seconds_to_all_running"],
        }


def scale_down_summary(
    scenario: str, peak: int, final: list[str], status: Any, tally: BlockTally, t0: float
) -> dict[str, Any]:
    """The JSON summary the scale-down scenarios share."""
    return {
        "scenario": scenario,
        "nodes_peak": peak,
        "nodes_final": len(final),
        "nodes_removed": status.scale_down_by_phase.get("Removed", 0),
        "blocked": tally.counts(),
        "evictions_refused": evictions_refused(status),
        "seconds_to_final": round(time.monotonic() - t0, 2),
    }
