"""The fake agent: what it reports (units from nodes, remaining after the instances it runs,
Ready flips), how it authenticates, and AgentFleet starting agents from a fake OCM's addons.
Growth's side is a small recording HTTP server here; tests/activities/fleet runs the agent
against growth's real agent API."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from sim.clouds.ocm import API, FakeOcm, Timings
from sim.fleet.agent import AGENT_API, FLEETSHARD_ADDON, AgentFleet, FakeAgent
from tests.polling import eventually


class GrowthStub:
    """Serves one cluster's config and instances; records status PUTs and their tokens."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens = tokens  # cluster id -> token
        self.max_nodes: dict[str, dict[str, int]] = {}
        self.kafkas: dict[str, list[dict[str, Any]]] = {}
        self.reports: list[tuple[str, dict[str, Any]]] = []
        self.refuse_with = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any = None) -> None:
                raw = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _cluster(self) -> tuple[str, str] | None:
                rest = self.path[len(AGENT_API) + 1 :].split("/", 1)
                cid = rest[0]
                if self.headers.get("Authorization") != f"Bearer {stub.tokens.get(cid)}":
                    self._answer(401, {"reason": "bad token"})
                    return None
                return cid, (rest[1] if len(rest) > 1 else "")

            def do_GET(self) -> None:
                got = self._cluster()
                if got is None:
                    return
                cid, sub = got
                if sub == "kafkas":
                    self._answer(200, {"kind": "ManagedKafkaList", "items": stub.kafkas.get(cid, [])})
                else:
                    caps = {t: {"maxNodes": n} for t, n in stub.max_nodes.get(cid, {}).items()}
                    self._answer(200, {"id": cid, "spec": {"capacity": caps}})  # DataplaneClusterAgentConfig

            def do_PUT(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                got = self._cluster()
                if got is None:
                    return
                if stub.refuse_with:
                    self._answer(stub.refuse_with, {"reason": "capacity.standard: refused"})
                    return
                stub.reports.append((got[0], body))
                self._answer(204)

        return Handler


def kafka(itype: str, units: int, name: str = "k") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": name,
            "labels": {
                "bf2.org/kafkaInstanceProfileType": itype,
                "bf2.org/kafkaInstanceProfileQuotaConsumed": str(units),
            },  # fmt: skip
        }
    }


@pytest.fixture
def growth() -> Iterator[GrowthStub]:
    stub = GrowthStub({"c1": "token-1", "c2": "token-2"})
    yield stub
    stub.close()


def test_units_from_nodes_and_remaining_after_instances(growth: GrowthStub) -> None:
    growth.max_nodes["c1"] = {"standard": 18, "developer": 1}
    growth.kafkas["c1"] = [kafka("standard", 2, "a"), kafka("standard", 1, "b"), kafka("developer", 1, "d")]
    agent = FakeAgent(growth.url, "c1", "token-1", units_per_node={"standard": 0.5, "developer": 2})
    try:
        assert agent.report() == 204
        cid, body = growth.reports[-1]
        assert cid == "c1"
        assert body["capacity"] == {
            "standard": {"maxUnits": 9, "remainingUnits": 6},
            "developer": {"maxUnits": 2, "remainingUnits": 1},
        }
        # kas-fleetshard leaves out null fields: no reason or message on a Ready condition
        condition = body["conditions"][0]
        assert condition == {"type": "Ready", "status": "True", "lastTransitionTime": condition["lastTransitionTime"]}
        assert "updatedTimestamp" in body
        assert body["strimzi"][0]["ready"] is True and body["strimzi"][0]["kafkaVersions"]
        agent.set_nodes("standard", 4)  # told about fewer nodes than the pool's max
        agent.set_ready(False)
        assert agent.report() == 204
        body = growth.reports[-1][1]
        assert body["capacity"]["standard"] == {"maxUnits": 2, "remainingUnits": 0}  # never negative
        assert body["conditions"][0]["status"] == "False"
    finally:
        agent.stop()


def test_authenticates_with_its_own_token(growth: GrowthStub) -> None:
    wrong = FakeAgent(growth.url, "c2", "token-1")  # c1's token reporting for c2
    try:
        assert wrong.report() == 401
        assert wrong.stats.refused == {401: 1} and growth.reports == []
    finally:
        wrong.stop()


def test_refused_report_is_recorded(growth: GrowthStub) -> None:
    growth.max_nodes["c1"] = {"standard": 3}
    growth.refuse_with = 400
    agent = FakeAgent(growth.url, "c1", "token-1")
    try:
        assert agent.report() == 400
        assert agent.stats.refused == {400: 1} and "capacity.standard" in agent.stats.last_refusal
    finally:
        agent.stop()


def test_running_agent_reports_a_ready_flip_at_once(growth: GrowthStub) -> None:
    growth.max_nodes["c1"] = {"standard": 3}
    agent = FakeAgent(growth.url, "c1", "token-1", interval_s=600).start()  # only the flip wakes it
    try:
        eventually(lambda: growth.reports, message="first report")
        agent.set_ready(False)
        eventually(lambda: growth.reports[-1][1]["conditions"][0]["status"] == "False", message="flip reported")
    finally:
        agent.stop()


def test_agent_fleet_follows_the_fleetshard_addon(growth: GrowthStub) -> None:
    growth.max_nodes["c1"] = {"standard": 3}
    timings = Timings(pending_s=100, installing_s=100, uninstalling_s=100, addon_install_s=100)
    with FakeOcm("t", timings=timings) as ocm, httpx.Client(base_url=ocm.url + API, headers={"Authorization": "Bearer t"}) as http:  # fmt: skip
        body = {"name": "gf-c1", "external_id": "c1", "cloud_provider": {"id": "aws"}, "region": {"id": "r"}}
        oid = http.post("/clusters", json=body).json()["id"]
        ocm.advance(200)
        params = [
            {"id": "control-plane-url", "value": growth.url},
            {"id": "cluster-id", "value": "c1"},
            {"id": "agent-token", "value": "token-1"},
        ]
        http.post(f"/clusters/{oid}/addons", json={"addon": {"id": FLEETSHARD_ADDON}, "parameters": {"items": params}})
        fleet = AgentFleet(ocm.addon_installations, interval_s=0.2)
        try:
            fleet.scan()
            assert fleet.agents == {}  # still installing
            ocm.advance(100)
            fleet.scan()
            assert list(fleet.agents) == ["c1"]
            eventually(lambda: growth.reports, message="the started agent reports")
            assert growth.reports[-1][1]["capacity"]["standard"]["maxUnits"] == 3
            http.delete(f"/clusters/{oid}")
            fleet.scan()
            assert fleet.agents == {} and fleet.started_total == 1
        finally:
            fleet.stop()
