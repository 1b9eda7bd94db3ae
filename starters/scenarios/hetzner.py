"""burst on Hetzner Cloud: the same Deployment burst as `burst`, against the fake Hetzner API.

The node group is seed 004's: CAX11 preferred, CX31/CX32 as an equal-priority backup, CX33 last.
The pods run a multi-arch image (no amd64-only affinity), so the arm64 CAX11 can take them. The
preferred type has no room in the first location (fsn1) and only a few machines in the others,
so requests first move across locations inside the provider, then across pools; the summary
shows where servers landed, the API requests spent and what is left of the project's budget.
Servers boot into the simulated cluster as Nodes (cloud-init join with the join token).

Secrets go where a real deployment keeps them: the API token and the join token are files
under the work directory, named in the worker config; no workflow input carries them.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from kubernetes import client

from activities.updates import query
from starters.kube import deployment, node_group
from starters.scenarios.burst import BurstScenario, max_nodes_for
from workflows.nodes.machine_gc import MachineGCWorkflow

if TYPE_CHECKING:
    from starters.processes import Processes
    from starters.scenarios.base import Demo

LOCATIONS = ["fsn1", "nbg1", "hel1"]
PREFERRED = "cax11"
# (server type, location) → machines the fake can still create. The preferred type is out of
# capacity in the first location and nearly so elsewhere: fallback across locations, then pools.
CAPACITY: dict[tuple[str, str], int] = {
    (PREFERRED, "fsn1"): 0,
    (PREFERRED, "nbg1"): 2,
    (PREFERRED, "hel1"): 1,
}

POOLS: list[dict[str, Any]] = [
    {"provider": "hetzner", "serverType": ["CAX11"], "priority": 90},
    {"provider": "hetzner", "serverType": ["CX31", "CX32"], "priority": 50},
    {"provider": "hetzner", "serverType": ["CX33"], "priority": 10},
]


def kubeconfig_endpoint(kubeconfig: Path) -> tuple[str, str]:
    """(server URL, bearer token) of the first cluster/user in a kubeconfig."""
    cfg = yaml.safe_load(kubeconfig.read_text())
    server = cfg["clusters"][0]["cluster"]["server"]
    token = cfg["users"][0]["user"]["token"]
    return str(server), str(token)


def control(base_url: str, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call the fake's control API (/sim/v1/...): capacity, faults, stats."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"{base_url}/sim/v1{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"{}")


class HetznerBurstScenario(BurstScenario):
    name = "burst"
    provider = "hetzner"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.base_url = ""

    def start_extra(self, procs: Processes, workdir: Path, kube_url: str, kubeconfig: Path) -> dict[str, Any]:
        server, kube_token = kubeconfig_endpoint(kubeconfig)
        secrets_dir = workdir / "secrets"
        secrets_dir.mkdir(parents=True, exist_ok=True)
        api_token = secrets.token_hex(16)
        join_token = f"{secrets.token_hex(3)}.{secrets.token_hex(8)}"  # kubeadm's shape
        token_file = secrets_dir / "hcloud-token"
        join_file = secrets_dir / "join-token"
        for path, value in ((token_file, api_token), (join_file, join_token)):
            path.write_text(value + "\n")
            path.chmod(0o600)
        # The fake reads its secrets from argv: it is the outside world, not growth.
        proc = procs.start(
            "fake-hetzner",
            [
                sys.executable,
                "-m",
                "sim.clouds.hetzner",
                "--port",
                "0",
                "--token",
                api_token,
                "--kube-url",
                server,
                "--kube-token",
                kube_token,
                "--join-token",
                join_token,
                "--boot-delay",
                "0.5",
            ],
        )
        endpoint = proc.wait_for_line(r"fake Hetzner API at (\S+)", 30).group(1)
        self.base_url = endpoint.removesuffix("/v1")
        for (server_type, location), count in CAPACITY.items():
            control(
                self.base_url, "POST", "/capacity", {"server_type": server_type, "location": location, "count": count}
            )
        return {
            "endpoint": endpoint,
            "token_file": str(token_file),
            "join_token_file": str(join_file),
            "join_endpoint": server,
        }

    def providers(self, workdir: Path, extra: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {
            "hetzner": {
                "api_endpoint": extra["endpoint"],
                "token_file": extra["token_file"],
                "join_token_file": extra["join_token_file"],
                "join_endpoint": extra["join_endpoint"],
                "locations": LOCATIONS,
                "cache_ttl_s": 2.0,  # a removed type shows up within a scan or two
                "poll_interval_s": 0.1,
                "retry_base_s": 0.1,
                "retry_cap_s": 1.0,
                "timeout_s": 10.0,
                "default_rate_limit_retry_s": 2.0,
            }
        }

    def node_groups(self) -> list[dict[str, Any]]:
        return [
            node_group(
                "general",
                POOLS,
                labels={"growth.autoscaling.dev/demo": "true"},
                maxNodes=max_nodes_for(self.args.pods),
            )
        ]

    def workload(self) -> dict[str, Any]:
        # Multi-arch image: only the os selector, so arm64 (CAX) and amd64 (CX) nodes both fit.
        return deployment(
            self.app, self.args.pods, cpu="500m", memory="512Mi", nodeSelector={"kubernetes.io/os": "linux"}
        )

    def stats(self) -> dict[str, Any]:
        return control(self.base_url, "GET", "/stats")

    def servers(self) -> list[dict[str, Any]]:
        return list(control(self.base_url, "GET", "/servers")["servers"])

    async def run(self, demo: Demo) -> dict[str, Any]:
        summary = await self.scale_up(demo)
        stats = await asyncio.to_thread(self.stats)
        servers = await asyncio.to_thread(self.servers)
        nodes = await asyncio.to_thread(client.CoreV1Api(demo.api).list_node)
        node_ids = {n.spec.provider_id for n in nodes.items if n.spec and n.spec.provider_id}
        leaked = [s for s in servers if f"hcloud://{s['id']}" not in node_ids]
        gc = await query(demo.gc_handle, MachineGCWorkflow.status)
        placed: dict[str, dict[str, int]] = {}
        for s in servers:  # fallback across locations shows as one type in several locations
            by_location = placed.setdefault(s["server_type"]["name"], {})
            by_location[s["location"]["name"]] = by_location.get(s["location"]["name"], 0) + 1
        project = stats["projects"].get("default", {})
        summary.update(
            {
                "provider": self.provider,
                "servers_created": int(stats["created_total"]),
                "servers_leaked": len(leaked),
                "api_requests": int(stats["requests"]),
                "api_requests_per_server": round(int(stats["requests"]) / max(1, int(stats["created_total"])), 2),
                "responses_429": int(project.get("responses_429", 0)),
                "budget_left": int(project.get("rate_limit_remaining", 0)),
                "budget_limit_per_hour": int(stats.get("rate_limit_per_hour", 3600)),
                "servers_by_type_and_location": placed,
                "machines_collected": gc.state.collected_total,
                "unusable_pools": [f"{p.group}/{p.pool}: {p.reason}" for p in gc.state.unusable_pools],
            }
        )
        return summary
