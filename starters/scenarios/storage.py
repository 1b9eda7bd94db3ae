"""storage: seed 003's "scale down all nodes containing volume replicas" with sim-Longhorn (a node
with a detached volume's replica may go while another schedulable node keeps a healthy one).

Original nodes come from a small deployment; a 3-replica volume is attached, written and
detached on them; the deployment doubles the nodes; the new nodes get
`cluster-autoscaler.kubernetes.io/scale-down-disabled`; the workload goes away. growth removes
the old nodes except the one holding the last healthy replica (original + 1 blocked node);
attaching the volume on a new node rebuilds replicas there; after the detach the blocked
node goes too, and the volume's data is unchanged.

Deviation from the seed: the workload is scaled to zero rather than back to its original
replica count, so which pods stay where does not depend on the ReplicaSet's choice of victims.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubernetes import client

from scaling.kube.drain import ANNOTATION_SCALE_DOWN_DISABLED
from scaling.nodes.scale_down.storage import LAST_HEALTHY_REPLICA
from sim.storage.longhorn import FakeLonghorn
from starters.kube import deployment, node_group
from starters.scenarios.scale_down import SCALE_DOWN, BlockTally, ScaleDownScenario, managed_nodes, scale_down_summary

if TYPE_CHECKING:
    from starters.processes import Processes
    from starters.scenarios.base import Demo

VOLUME = "vol-1"
PODS_PER_NODE = 2
ORIGINAL_NODES = 3


class StorageScenario(ScaleDownScenario):
    name = "storage"
    app = "storage-app"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.longhorn: FakeLonghorn | None = None

    def providers(self, workdir: Path, extra: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {"kwok": {}}

    def start_extra(self, procs: Processes, workdir: Path, kube_url: str, kubeconfig: Path) -> dict[str, Any]:
        self.longhorn = FakeLonghorn.from_kubeconfig(kubeconfig, interval=0.2).start()  # HTTPS: the CA is in it
        return {}

    def stop(self) -> None:
        if self.longhorn is not None:
            self.longhorn.stop()
            self.longhorn = None

    def node_groups(self) -> list[dict[str, Any]]:
        return [
            node_group(
                "storage",
                [{"provider": "kwok", "serverType": ["cx22"], "priority": 100}],
                maxNodes=20,
                scaleDown=SCALE_DOWN,
            )
        ]

    async def _replicas(self, demo: Demo, replicas: int) -> None:
        """Set the deployment's replicas and wait until that many pods run and nothing is in flight."""
        apps, core = client.AppsV1Api(demo.api), client.CoreV1Api(demo.api)
        try:
            await asyncio.to_thread(
                apps.patch_namespaced_deployment_scale, self.app, "default", {"spec": {"replicas": replicas}}
            )
        except client.ApiException as e:
            if e.status != 404:
                raise
            body = deployment(self.app, replicas, cpu="800m", memory="256Mi")
            await asyncio.to_thread(apps.create_namespaced_deployment, "default", body)
        deadline = time.monotonic() + self.args.timeout
        while True:
            pods = (
                await asyncio.to_thread(core.list_namespaced_pod, "default", label_selector=f"app={self.app}")
            ).items
            running = sum(1 for p in pods if p.status.phase == "Running")
            status = await demo.status()
            if running == replicas == len(pods) and not status.in_flight:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{running}/{replicas} pods of {self.app} running")
            await asyncio.sleep(0.5)

    async def _until(self, demo: Demo, what: str, check: Any, tally: BlockTally) -> Any:
        deadline = time.monotonic() + self.args.timeout
        while True:
            status = await demo.status()
            tally.update(status)
            got = await check(status)
            if got:
                return got
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: candidates {[(c.node, c.state, c.reason) for c in status.candidates]}")
            await asyncio.sleep(0.5)

    async def run(self, demo: Demo) -> dict[str, Any]:
        lh = self.longhorn
        assert lh is not None
        core = client.CoreV1Api(demo.api)
        tally = BlockTally()
        await self._replicas(demo, ORIGINAL_NODES * PODS_PER_NODE)
        original = await managed_nodes(demo)
        print(f"  original nodes: {original}", flush=True)
        replicas_on = await asyncio.to_thread(lh.create_volume, VOLUME, len(original))
        await asyncio.to_thread(lh.attach, VOLUME, original[0])
        await asyncio.to_thread(lh.write, VOLUME, b"seed 003 data " * 4096)
        before = await asyncio.to_thread(lh.checksum, VOLUME)
        await asyncio.to_thread(lh.detach, VOLUME)
        print(f"  volume {VOLUME}: replicas on {replicas_on}, written and detached", flush=True)

        await self._replicas(demo, 2 * len(original) * PODS_PER_NODE)
        doubled = await managed_nodes(demo)
        peak = len(doubled)
        new = [n for n in doubled if n not in original]
        for n in new:  # the seed pins the new nodes so that only the old ones go
            await asyncio.to_thread(
                core.patch_node, n, {"metadata": {"annotations": {ANNOTATION_SCALE_DOWN_DISABLED: "true"}}}
            )
        print(f"  doubled to {peak} nodes; new nodes {new} pinned", flush=True)

        t0 = time.monotonic()
        await asyncio.to_thread(client.AppsV1Api(demo.api).delete_namespaced_deployment, self.app, "default")

        async def held(status: Any) -> Any:
            # The held node's reason must come from a pass after the other old nodes went: the
            # pass that chose them saw their replicas as peers, so it said NotEnoughPdb (the
            # stand-in's PDB) for it, and that status may still be current when they are gone.
            nodes = await managed_nodes(demo)
            blocked = [c for c in status.candidates if c.state == "Blocked" and c.node in original]
            if (
                len(nodes) == len(new) + 1
                and not status.scale_downs
                and len(blocked) == 1
                and blocked[0].reason == LAST_HEALTHY_REPLICA
            ):
                return [blocked[0].node]
            return None

        blocked_nodes = await self._until(demo, "original + 1 blocked node", held, tally)
        print(f"  held: {blocked_nodes} (reasons {tally.counts()})", flush=True)

        await asyncio.to_thread(lh.attach, VOLUME, new[0])
        ok = await asyncio.to_thread(
            lh.wait_until, lambda: sum(h for _, h in lh.volume(VOLUME)["replicas"]) >= len(original), 30.0
        )
        if not ok:
            raise TimeoutError(f"replicas not rebuilt: {lh.volume(VOLUME)}")
        same_attached = await asyncio.to_thread(lh.checksum, VOLUME) == before
        await asyncio.to_thread(lh.detach, VOLUME)

        async def back(status: Any) -> Any:
            nodes = await managed_nodes(demo)
            return nodes if sorted(nodes) == sorted(new) and not status.scale_downs else None

        final = await self._until(demo, "back to the original number of nodes", back, tally)
        status = await demo.status()
        after = await asyncio.to_thread(lh.checksum, VOLUME)
        return {
            **scale_down_summary(self.name, peak, final, status, tally, t0),
            "volume_checksum_unchanged": same_attached and after == before,
            "blocked_nodes_final": len(blocked_nodes),
            "_ok": same_attached and after == before and len(final) == len(original),
        }
