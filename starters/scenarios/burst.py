"""burst: a Deployment scales out past what the cluster has; the preferred pool runs out of
capacity after a few nodes, so later requests record InsufficientCapacity there and succeed
on the next pool."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client

from scaling.kube.quantity import cpu_millis, memory_bytes
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
from starters.kube import deployment, node_group
from starters.scenarios.base import Demo, Scenario
from starters.scenarios.progress import PodWatch, RequestLog, draw, percentile, problem_summary, progress_bar

PREFERRED_CAPACITY = 3  # nodes the preferred pool can give before it reports no capacity


def max_nodes_for(pods: int) -> int:
    """The demo group's maxNodes: a node per pod at worst, so `--pods N` fits for any N."""
    return max(50, pods)


def nodes_by_pool(
    nodes: list[client.V1Node], running_on: Mapping[str, int], requests: Mapping[str, str]
) -> dict[str, dict[str, int]]:
    """Per pool (its nodes' pool label): how many nodes, how many of the workload's pods run on
    them, and how many of those pods one of its nodes holds by its allocatable (`pods_per_node`,
    the fewest over its nodes; the demo runs no DaemonSets). A test reads from it whether the
    nodes bought were packed for their type's size, however the pods reached the loop."""
    cpu, memory = cpu_millis(requests["cpu"]), memory_bytes(requests["memory"])
    out: dict[str, dict[str, int]] = {}
    for n in nodes:
        alloc = n.status.allocatable or {}
        holds = min(cpu_millis(alloc["cpu"]) // cpu, memory_bytes(alloc["memory"]) // memory, int(alloc["pods"]))
        pool = out.setdefault(n.metadata.labels.get(LABEL_POOL, ""), {"nodes": 0, "pods": 0, "pods_per_node": holds})
        pool["nodes"] += 1
        pool["pods"] += running_on.get(n.metadata.name, 0)
        pool["pods_per_node"] = min(pool["pods_per_node"], holds)
    return out


class BurstScenario(Scenario):
    name = "burst"
    app = "burst"

    def providers(self, workdir: Path, extra: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {"kwok": {"capacity": {"kwok-cx22": PREFERRED_CAPACITY}}}

    def node_groups(self) -> list[dict[str, Any]]:
        return [
            node_group(
                "general",
                [
                    {"provider": "kwok", "serverType": ["cx22"], "priority": 100},
                    {"provider": "kwok", "serverType": ["cx32", "cpx31"], "priority": 50},
                ],
                labels={"growth.autoscaling.dev/demo": "true"},
                maxNodes=max_nodes_for(self.args.pods),
            )
        ]

    def workload(self) -> dict[str, Any]:
        # Selectors as charts commonly write them: the well-known os label and an arch affinity.
        return deployment(
            self.app,
            self.args.pods,
            cpu="500m",
            memory="512Mi",
            nodeSelector={"kubernetes.io/os": "linux"},
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
                        ]
                    }
                }
            },
        )

    async def scale_up(self, demo: Demo, watch: PodWatch | None = None) -> dict[str, Any]:
        """Create the workload and follow it until every pod runs; the burst summary."""
        apps = client.AppsV1Api(demo.api)
        watch = watch or PodWatch(demo.api, f"app={self.app}")
        requests = RequestLog()
        t0 = time.monotonic()
        await asyncio.to_thread(apps.create_namespaced_deployment, "default", self.workload())
        deadline = t0 + self.args.timeout
        last_draw = 0.0
        while True:
            await watch.poll()
            status = await demo.status()
            requests.update(status)
            if time.monotonic() - last_draw > (0.5 if not self.args.headless else 2.0):
                draw(progress_bar(watch.running, self.args.pods), not self.args.headless)
                last_draw = time.monotonic()
            if watch.total == self.args.pods and watch.running == self.args.pods and not status.in_flight:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"only {watch.running}/{self.args.pods} pods running after {self.args.timeout:.0f}s "
                    f"(requests: {status.requests_by_phase}; {problem_summary(status)})"
                )
            # Listing thousands of pods costs the simulated API server seconds: poll less often.
            await asyncio.sleep(max(0.2, self.args.pods / 2500))
        seconds = time.monotonic() - t0
        draw(progress_bar(watch.running, self.args.pods), not self.args.headless)
        print(flush=True)
        nodes = await asyncio.to_thread(client.CoreV1Api(demo.api).list_node, label_selector=LABEL_GROUP)
        latencies = watch.decision_latencies(requests.started.values())
        workload_requests = self.workload()["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        return {
            "scenario": self.name,
            "pods": self.args.pods,
            "pods_running": watch.running,
            "nodes_created": len(nodes.items),
            "requests": status.requests_by_phase,
            "attempts": status.attempts_by_pool,
            "nodes_by_pool": nodes_by_pool(nodes.items, watch.running_on, workload_requests),
            "seconds_to_all_running": round(seconds, 2),
            "decision_latency_p50_s": percentile(latencies, 0.50),
            "decision_latency_p99_s": percentile(latencies, 0.99),
        }

    async def run(self, demo: Demo) -> dict[str, Any]:
        return await self.scale_up(demo)
