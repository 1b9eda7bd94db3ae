"""burst: a Deployment scales out past what the cluster has; the preferred pool runs out of
capacity after a few nodes, so later requests record InsufficientCapacity there and succeed
on the next pool."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from scaling.nodes.models import LABEL_GROUP
from starters.kube import deployment, node_group
from starters.scenarios.base import Demo, Scenario
from starters.scenarios.progress import PodWatch, RequestLog, draw, percentile, problem_summary, progress_bar

PREFERRED_CAPACITY = 3  # nodes the preferred pool can give before it reports no capacity


def max_nodes_for(pods: int) -> int:
    """The demo group's maxNodes: a node per pod at worst, so `--pods N` fits for any N."""
    return max(50, pods)


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
        return {
            "scenario": self.name,
            "pods": self.args.pods,
            "pods_running": watch.running,
            "nodes_created": len(nodes.items),
            "requests": status.requests_by_phase,
            "attempts": status.attempts_by_pool,
            "seconds_to_all_running": round(seconds, 2),
            "decision_latency_p50_s": percentile(latencies, 0.50),
            "decision_latency_p99_s": percentile(latencies, 0.99),
        }

    async def run(self, demo: Demo) -> dict[str, Any]:
        return await self.scale_up(demo)
