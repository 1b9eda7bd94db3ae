"""A fake data-plane agent (fleetshard-like) that reports to growth's agent API over HTTP.

It stands for the software a real data-plane cluster runs, so it never imports growth's
packages: it speaks the agent API's JSON (camelCase, as kas-fleetshard does):

- GET  {api}/api/kafkas_mgmt/v1/agent-clusters/{id}          -> spec.capacity.<type>.maxNodes
- GET  {api}/api/kafkas_mgmt/v1/agent-clusters/{id}/kafkas   -> the instances placed there
- PUT  {api}/api/kafkas_mgmt/v1/agent-clusters/{id}/status   <- conditions, capacity, strimzi
- PUT  {api}/api/kafkas_mgmt/v1/agent-clusters/{id}/kafkas/status <- instance id -> status: Ready
  with the versions it was asked for, or Deleted once spec.deleted is set (sent when it changes)

Bodies are shaped as kas-fleetshard's sync writes them (its api module's v1alpha1
ManagedKafkaAgentStatus and ManagedKafkaStatus, serialised leaving out null fields): conditions
with `lastTransitionTime`, `updatedTimestamp`, capacity with both units (zero included), and an
instance's status only when it changed.

Each report computes, per instance type, maxUnits = floor(nodes x units_per_node) from the nodes
the agent was told about (`set_nodes`) or, by default, the machine pool's maxNodes growth gives
it, and remainingUnits = maxUnits - the units of the instances it runs (placed and reserved).
Its Ready condition can be flipped (`set_ready`). It authenticates with its own bearer token.

`AgentFleet` plays OCM's part of installing the agent: it watches a fake OCM's addon
installations and starts one agent per cluster whose fleetshard addon is ready, configured from
that installation's parameters (control-plane URL, cluster id, token), and stops it once the
cluster is being uninstalled.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

AGENT_API = "/api/kafkas_mgmt/v1/agent-clusters"
# Parameters the fleetshard addon is installed with (see activities/fleet on growth's side).
PARAM_CONTROL_PLANE_URL = "control-plane-url"
PARAM_CLUSTER_ID = "cluster-id"
PARAM_AGENT_TOKEN = "agent-token"
FLEETSHARD_ADDON = "kas-fleetshard-operator"
DEFAULT_STRIMZI = [
    {
        "version": "strimzi-cluster-operator.v0.38.0-1",
        "ready": True,
        "kafkaVersions": ["3.5.1", "3.6.0"],
        "kafkaIbpVersions": ["3.5", "3.6"],
    }
]


@dataclass
class AgentStats:
    reports: int = 0
    accepted: int = 0  # 204
    refused: dict[int, int] = field(default_factory=dict)  # status -> count
    errors: int = 0  # transport failures
    last_status: dict[str, Any] = field(default_factory=dict)
    last_refusal: str = ""


class FakeAgent:
    """One cluster's agent. `report()` once, or `start()` a thread that reports every interval."""

    def __init__(
        self,
        api_url: str,
        cluster_id: str,
        token: str,
        *,
        units_per_node: dict[str, float] | None = None,
        ready: bool = True,
        strimzi: list[dict[str, Any]] | None = None,
        interval_s: float = 1.0,
        timeout_s: float = 10.0,
    ) -> None:
        self.cluster_id = cluster_id
        self.units_per_node = dict(units_per_node or {})
        self.ready = ready
        self.strimzi = strimzi if strimzi is not None else [dict(s) for s in DEFAULT_STRIMZI]
        self.interval_s = interval_s
        self.stats = AgentStats()
        self._nodes: dict[str, int] = {}
        self._since = now()
        self._sent: dict[str, dict[str, Any]] = {}  # instance statuses last accepted
        self._lock = threading.Lock()
        self._http = httpx.Client(
            base_url=f"{api_url.rstrip('/')}{AGENT_API}/{cluster_id}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the agent is told -----------------------------------------------------------
    def set_ready(self, ready: bool) -> None:
        """Flip the Ready condition; a running agent reports at once."""
        with self._lock:
            if ready != self.ready:
                self._since = now()
            self.ready = ready
        self._wake.set()

    def set_nodes(self, instance_type: str, nodes: int | None) -> None:
        """The nodes this type can use (None: the machine pool's maxNodes from growth)."""
        with self._lock:
            if nodes is None:
                self._nodes.pop(instance_type, None)
            else:
                self._nodes[instance_type] = nodes
        self._wake.set()

    # -- what it reads from growth ---------------------------------------------------------
    def config(self) -> dict[str, Any]:
        resp = self._http.get("")
        resp.raise_for_status()
        return resp.json()

    def kafkas(self) -> list[dict[str, Any]]:
        resp = self._http.get("/kafkas")
        resp.raise_for_status()
        return list(resp.json().get("items") or [])

    # -- the report -----------------------------------------------------------------------
    def status(self, config: dict[str, Any], kafkas: list[dict[str, Any]]) -> dict[str, Any]:
        """The status body from growth's config (maxNodes per type) and the instances running."""
        spec_capacity = (config.get("spec") or {}).get("capacity") or {}
        max_nodes = {t: int((c or {}).get("maxNodes") or 0) for t, c in spec_capacity.items()}
        with self._lock:
            nodes = {**max_nodes, **self._nodes}
            ready = self.ready
        used: dict[str, int] = {}
        for k in kafkas:
            if (k.get("spec") or {}).get("deleted"):
                continue  # being removed: its room is free
            itype, units = instance_type_and_units(k)
            if itype:
                used[itype] = used.get(itype, 0) + units
        capacity = {}
        for itype, n in sorted(nodes.items()):
            max_units = math.floor(n * self.units_per_node.get(itype, 1.0))
            capacity[itype] = {"maxUnits": max_units, "remainingUnits": max(0, max_units - used.get(itype, 0))}
        condition = {"type": "Ready", "status": "True", "lastTransitionTime": self._since}
        if not ready:
            condition.update(status="False", reason="Error", message="the agent reports the cluster not ready")
        return {"conditions": [condition], "capacity": capacity, "strimzi": self.strimzi, "updatedTimestamp": now()}

    def kafka_statuses(self, kafkas: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Each ManagedKafka's status as fleetshard reports it: Deleted when spec.deleted, else
        Ready running the versions its spec asks for."""
        out: dict[str, dict[str, Any]] = {}
        for k in kafkas:
            kid = k.get("id") or ((k.get("metadata") or {}).get("annotations") or {}).get("bf2.org/id", "")
            spec = k.get("spec") or {}
            if spec.get("deleted"):
                out[kid] = {"conditions": [{"type": "Ready", "status": "False", "reason": "Deleted"}]}
            else:
                versions = {k: v for k, v in (spec.get("versions") or {}).items() if v}
                out[kid] = {"conditions": [{"type": "Ready", "status": "True"}], "versions": versions}
        return out

    def report(self) -> int:
        """Read config and instances, PUT the status (and the instances' statuses that changed);
        the HTTP status of the cluster's report (0 on a transport error)."""
        try:
            kafkas = self.kafkas()
            statuses = self.kafka_statuses(kafkas)
            changed = {kid: st for kid, st in statuses.items() if self._sent.get(kid) != st}
            if changed:
                stamp = now()
                body = {kid: stamped(st, stamp) for kid, st in changed.items()}
                self._http.put("/kafkas/status", json=body).raise_for_status()
                self._sent = statuses
            body = self.status(self.config(), kafkas)
            resp = self._http.put("/status", json=body)
        except httpx.HTTPStatusError as err:
            return self._refused(err.response)
        except httpx.TransportError:
            self.stats.errors += 1
            return 0
        self.stats.reports += 1
        self.stats.last_status = body
        if resp.status_code == 204:
            self.stats.accepted += 1
            return 204
        return self._refused(resp)

    def _refused(self, resp: httpx.Response) -> int:
        self.stats.refused[resp.status_code] = self.stats.refused.get(resp.status_code, 0) + 1
        self.stats.last_refusal = resp.text
        return resp.status_code

    # -- the loop -------------------------------------------------------------------------
    def start(self) -> FakeAgent:
        self._thread = threading.Thread(target=self._loop, name=f"fake-agent-{self.cluster_id}", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            self.report()
            self._wake.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
            self._thread = None
        self._http.close()


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def stamped(status: dict[str, Any], at: str) -> dict[str, Any]:
    """An instance status as sent: its conditions' lastTransitionTime and updatedTimestamp."""
    conditions = [{**c, "lastTransitionTime": at} for c in status["conditions"]]
    return {**status, "conditions": conditions, "updatedTimestamp": at}


def instance_type_and_units(kafka: dict[str, Any]) -> tuple[str, int]:
    """A ManagedKafka item's instance type and streaming units, from its labels (as fleetshard
    reads `bf2.org/kafkaInstanceProfileType` and `...QuotaConsumed`)."""
    labels = (kafka.get("metadata") or {}).get("labels") or {}
    itype = labels.get("bf2.org/kafkaInstanceProfileType", "")
    try:
        units = int(labels.get("bf2.org/kafkaInstanceProfileQuotaConsumed", "1"))
    except ValueError:
        units = 1
    return itype, units


class AgentFleet:
    """Starts an agent for each cluster whose fleetshard addon a fake OCM reports ready, from the
    addon's parameters, and stops it when the cluster is uninstalled. `installations` is a
    callable returning FakeOcm.addon_installations() (or the control API's /sim/v1/addons)."""

    def __init__(
        self,
        installations: Callable[[], list[dict[str, Any]]],
        *,
        units_per_node: dict[str, float] | None = None,
        interval_s: float = 1.0,
        scan_s: float = 0.5,
        api_url: str | None = None,  # overrides the addon's control-plane URL
    ) -> None:
        self._installations = installations
        self.units_per_node = units_per_node
        self.interval_s = interval_s
        self.scan_s = scan_s
        self.api_url = api_url
        self.agents: dict[str, FakeAgent] = {}  # growth cluster id -> agent
        self.started_total = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def scan(self) -> None:
        """One pass: start agents for newly ready addons, stop those of uninstalled clusters."""
        live: set[str] = set()
        for inst in self._installations():
            if inst["addon_id"] != FLEETSHARD_ADDON or inst["cluster_state"] != "ready" or inst["state"] != "ready":
                continue
            params = inst["parameters"]
            cluster_id = params.get(PARAM_CLUSTER_ID) or inst["external_id"]
            live.add(cluster_id)
            if cluster_id in self.agents:
                continue
            url = self.api_url or params.get(PARAM_CONTROL_PLANE_URL, "")
            agent = FakeAgent(
                url,
                cluster_id,
                params.get(PARAM_AGENT_TOKEN, ""),
                units_per_node=self.units_per_node,
                interval_s=self.interval_s,
            )
            self.agents[cluster_id] = agent.start()
            self.started_total += 1
        for cluster_id in [c for c in self.agents if c not in live]:
            self.agents.pop(cluster_id).stop()

    def start(self) -> AgentFleet:
        self._thread = threading.Thread(target=self._loop, name="fake-agent-fleet", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.scan_s):
            try:
                self.scan()
            except Exception:  # noqa: BLE001 - the outside world keeps going; the next scan retries
                continue

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
            self._thread = None
        for agent in self.agents.values():
            agent.stop()
        self.agents.clear()
