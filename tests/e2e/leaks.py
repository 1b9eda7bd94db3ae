"""After a demo run: look for the secrets it used in every place they must never be.

The secrets are what the demo wrote for its processes: every kubeconfig user token (the sim
API server's bearer token), every file a worker config names as a token or secret file (the
Hetzner token, the join token, OCM's token, the agent-token secret, a Prometheus token...),
and each fleet cluster's agent token derived from that secret. The places: every workflow
history on the demo's Temporal database (a dev server is started on it again, headless, to
fetch them), every process log, and every Kubernetes Event the simulated cluster ever stored
(its data directory, read as the cluster's store and as raw journal bytes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from temporalio.client import Client

from activities.fleet.settings import AgentApiSettings
from activities.fleet.tokens import AgentTokens
from sim.kube.journal import SNAPSHOT, WAL
from sim.kube.store import Store
from tests.e2e.demo import demo_database

MIN_SECRET = 8  # shorter values would match by chance
AGENT_TOKEN = re.compile(rb"gat_[0-9a-f]{64}")  # any agent token, whoever it belongs to
CLUSTER_ID = re.compile(r"^fleet/cluster/(.+)$")


def _walk(node: Any, key: str = "") -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        return [kv for k, v in node.items() for kv in _walk(v, str(k))]
    if isinstance(node, list):
        return [kv for v in node for kv in _walk(v, key)]
    return [(key, node)]


def demo_secrets(workdir: Path) -> dict[str, str]:
    """name -> value of every secret the demo in `workdir` handed to its processes."""
    found: dict[str, str] = {}
    for path in workdir.glob("*.yaml"):
        config = yaml.safe_load(path.read_text()) or {}
        for key, value in _walk(config):
            if key.endswith("_file") and ("token" in key or "secret" in key) and Path(str(value)).is_file():
                found[f"{path.name}:{key}"] = Path(value).read_text().strip()
    for path in [*workdir.glob("*kubeconfig"), *workdir.glob("**/kubeconfig")]:
        for user in (yaml.safe_load(path.read_text()) or {}).get("users") or []:
            if (user.get("user") or {}).get("token"):
                found[f"{path.name}:token"] = user["user"]["token"]
    for path in workdir.glob("secrets/*"):
        found[f"secrets/{path.name}"] = path.read_text().strip()
    return {name: value for name, value in found.items() if len(value) >= MIN_SECRET}


def _hits(where: str, data: bytes, secrets: dict[str, str]) -> list[str]:
    out = [f"{name} in {where}" for name, value in secrets.items() if value.encode() in data]
    if AGENT_TOKEN.search(data):
        out.append(f"an agent token in {where}")
    return out


async def _histories(workdir: Path) -> dict[str, bytes]:
    """Every workflow run's history on the demo's database, as raw protobuf and as JSON."""
    with demo_database(workdir, workdir / "leak-scan") as port:
        client = await Client.connect(f"127.0.0.1:{port}")
        out: dict[str, bytes] = {}
        async for wf in client.list_workflows():
            history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
            # Payloads are raw bytes in the protobuf (base64 in the JSON): scan both.
            raw = b"".join(event.SerializeToString() for event in history.events)
            out[f"{wf.id} ({wf.run_id})"] = raw + history.to_json().encode()
        return out


def _events(data_dir: Path) -> tuple[int, bytes]:
    """Every Event in the simulated cluster's store, then the journal's raw bytes (deleted ones too)."""
    store = Store(data_dir=data_dir)
    try:
        events = [
            repr(e).encode()
            for rt in (store.builtin("events"), store.builtin("events", "events.k8s.io"))
            for e in store.all(rt)
        ]
    finally:
        store.close()
    journal = b"".join(p.read_bytes() for p in (data_dir / WAL, data_dir / SNAPSHOT) if p.exists())
    return len(events), b"\n".join(events) + journal


@dataclass
class Scan:
    secrets: dict[str, str]  # name -> value looked for
    histories: int = 0
    logs: int = 0
    events: int = 0
    found: list[str] = field(default_factory=list)  # "<secret> in <where>"


async def scan_demo(workdir: Path) -> Scan:
    """Read every history, log and Event of the demo run in `workdir`, looking for its secrets."""
    secrets = demo_secrets(workdir)
    histories = await _histories(workdir)
    agent_secret = next((p for p in workdir.glob("agent-secret")), None)
    if agent_secret is not None:
        tokens = AgentTokens(AgentApiSettings(token_secret_file=str(agent_secret)))
        for run in histories:
            if m := CLUSTER_ID.match(run.split(" ")[0]):
                secrets[f"agent token of {m.group(1)}"] = tokens.token_for(m.group(1))
    scan = Scan(secrets, histories=len(histories))
    for where, data in histories.items():
        scan.found += _hits(f"history {where}", data, secrets)
    for log in sorted((workdir / "logs").glob("*.log")):
        scan.logs += 1
        scan.found += _hits(f"log {log.name}", log.read_bytes(), secrets)
    if (workdir / "sim-cluster").is_dir():
        scan.events, data = _events(workdir / "sim-cluster")
        scan.found += _hits("Kubernetes Events", data, secrets)
    return scan
