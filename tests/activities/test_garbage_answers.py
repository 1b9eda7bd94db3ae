"""Counterparts answering garbage over real HTTP (a local server that answers what each test
asks for): wrong JSON shapes, truncated, huge and slow bodies. Each client fails with its
"unavailable" error and a clear, short reason (which the loops read as "no answer this round",
never as "no load" or "nothing there"); nothing huge reaches an activity result or a message."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from temporalio.exceptions import ApplicationError

from activities.answers import MAX_QUOTED_CHARS, MAX_RESULT_ANSWER_BYTES, AnswerTooLarge, BoundedTransport
from activities.components.external import RecommenderUnavailable, recommended_replicas
from activities.components.pd import PdClient, PdUnavailable
from activities.components.prometheus import MetricsUnavailable, PrometheusClient
from activities.fleet.ocm_client import OcmClient
from activities.fleet.settings import OcmSettings
from scaling.fleet import contracts

FIVE_MB = 5 * 1024 * 1024


class Garbage:
    """What the server answers next: (status, body bytes, how it is sent)."""

    status = 200
    body = b""
    mode = "whole"  # whole | truncated (Content-Length says more) | chunked | slow


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_: object) -> None:  # quiet
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        g = self.server.garbage  # type: ignore[attr-defined]
        self.send_response(g.status)
        self.send_header("Content-Type", "application/json")
        if g.mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(g.body), 65536):
                chunk = g.body[i : i + 65536]
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        declared = len(g.body) * (2 if g.mode == "truncated" else 1)
        self.send_header("Content-Length", str(declared))
        self.end_headers()
        if g.mode == "slow":
            self.wfile.write(g.body[:5])
            self.wfile.flush()
            time.sleep(1.5)  # over the clients' 0.5 s read timeout
        self.wfile.write(g.body)
        if g.mode == "truncated":
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = _answer


class Server(ThreadingHTTPServer):
    def handle_error(self, *_: object) -> None:  # a client that stops reading a huge answer: expected
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, Garbage]]:
    srv = Server(("127.0.0.1", 0), Handler)
    srv.garbage = Garbage()  # type: ignore[attr-defined]
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_port}", srv.garbage  # type: ignore[attr-defined]
    srv.shutdown()
    srv.server_close()


def answers(g: Garbage, body: object, mode: str = "whole", status: int = 200) -> None:
    g.body = body if isinstance(body, bytes) else json.dumps(body).encode()
    g.mode, g.status = mode, status


HUGE_LIST = b"[" + b",".join([b'{"component": "tikv", "count": 1}'] * (FIVE_MB // 33)) + b"]"
GARBAGE = {
    "huge": (HUGE_LIST, "whole", "over"),
    "huge chunked": (HUGE_LIST, "chunked", "over"),
    "truncated": (b'[{"component": "tikv", "cou', "truncated", "RemoteProtocolError"),
    "slow": (b'[{"component": "tikv", "count": 1}]', "slow", "Timeout"),
    "not json": (b"<html>" + b"x" * 100_000, "whole", "not JSON"),
}


@pytest.mark.parametrize("case", list(GARBAGE))
def test_pd_garbage_is_unavailable_with_a_short_reason(server: tuple[str, Garbage], case: str) -> None:
    url, g = server
    body, mode, reason = GARBAGE[case]
    answers(g, body, mode)
    pd = PdClient(url, timeout_s=0.5)
    with pytest.raises(PdUnavailable, match=reason) as err:
        pd.autoscaling({"resources": []})
    assert len(str(err.value)) < 2 * MAX_QUOTED_CHARS
    pd.close()


@pytest.mark.parametrize(
    "body, field",
    [
        ({"plans": []}, "expected a list of plans"),
        ([{"component": "tikv", "count": "3"}], "count"),
        ([{"component": "tikv", "count": True}], "count"),
        ([{"component": "tikv", "count": 2.5}], "count"),
        ([{"component": "tikv", "count": -1}], "count"),
        ([{"component": "tikv", "count": 1, "labels": ["a"]}], "malformed plan"),
        ([{"count": 1}], "component"),
        (["x" * FIVE_MB], "over"),
    ],
)
def test_pd_wrong_shapes_are_refused_naming_the_field(server: tuple[str, Garbage], body: object, field: str) -> None:
    url, g = server
    answers(g, body)
    pd = PdClient(url, timeout_s=2)
    with pytest.raises(PdUnavailable, match=field) as err:
        pd.autoscaling({"resources": []})
    assert len(str(err.value)) < 2 * MAX_QUOTED_CHARS
    pd.close()


@pytest.mark.parametrize(
    "body",
    [
        {"status": "success", "data": []},
        {"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}},
        {"status": "success", "data": {"resultType": "vector", "result": ["x"]}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": "1"}]}},
        {"status": "success", "data": {"resultType": "matrix", "result": []}},
        {"status": "error", "error": "e" * FIVE_MB},
        [1, 2, 3],
    ],
)
def test_prometheus_garbage_is_unavailable(server: tuple[str, Garbage], body: object) -> None:
    url, g = server
    answers(g, body)
    prom = PrometheusClient(url, timeout_s=2)
    with pytest.raises(MetricsUnavailable) as err:
        prom.query("up")
    assert len(str(err.value)) < 2 * MAX_QUOTED_CHARS
    prom.close()


@pytest.mark.parametrize(
    "body, reason",
    [
        ({"name": "c", "namespace": "ns", "type": "tikv", "recommendedReplicas": "3"}, "recommendedReplicas"),
        ({"name": "c", "namespace": "ns", "type": "tikv", "recommendedReplicas": 3.0}, "recommendedReplicas"),
        ({"name": "c", "namespace": "ns", "type": "tikv"}, "recommendedReplicas"),
        ({"name": "x" * FIVE_MB}, "over"),
        ([], "malformed"),
    ],
)
def test_recommender_garbage_is_unavailable(server: tuple[str, Garbage], body: object, reason: str) -> None:
    url, g = server
    answers(g, body)
    with pytest.raises(RecommenderUnavailable, match=reason) as err:
        recommended_replicas(url, "ns", "c", "tikv", timeout_s=2)
    assert len(str(err.value)) < 3 * MAX_QUOTED_CHARS


async def test_ocm_five_megabyte_error_is_cut_and_a_huge_answer_refused(server: tuple[str, Garbage], tmp_path) -> None:  # type: ignore[no-untyped-def]
    url, g = server
    (tmp_path / "token").write_text("t")
    ocm = OcmClient(OcmSettings(base_url=url, token_file=str(tmp_path / "token"), timeout_s=2))
    answers(
        g, {"kind": "Error", "code": "CLUSTERS-MGMT-400", "reason": "attribute 'name' " + "r" * 3_000_000}, status=400
    )
    with pytest.raises(ApplicationError) as err:
        await ocm.request("POST", "/clusters", json={})
    assert err.value.type == contracts.ERR_OCM_BAD_REQUEST and "field name" in err.value.message
    assert len(err.value.message) < 2 * MAX_QUOTED_CHARS
    assert all(len(str(d)) < 2 * MAX_QUOTED_CHARS for d in err.value.details)
    answers(g, {"items": ["x" * FIVE_MB]})
    with pytest.raises(ApplicationError) as err:
        await ocm.search_clusters(external_id="c1")
    assert err.value.type == contracts.ERR_OCM_UNAVAILABLE and "over" in err.value.message
    answers(g, b"{" * 10, "truncated", status=503)
    with pytest.raises(ApplicationError) as err:
        await ocm.request("GET", "/clusters/x")
    assert err.value.type == contracts.ERR_OCM_UNAVAILABLE
    await ocm.aclose()


def test_the_bound_holds_by_content_length_and_while_streaming() -> None:
    big = b"x" * (MAX_RESULT_ANSWER_BYTES + 1)

    def declared(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=big)

    def streamed(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=iter([big[:1000], big[1000:]]))

    for handler in (declared, streamed):
        transport = BoundedTransport(httpx.MockTransport(handler), MAX_RESULT_ANSWER_BYTES)
        with httpx.Client(transport=transport) as http, pytest.raises(AnswerTooLarge, match="over 1048576 bytes"):
            http.get("http://pd.example/x")
    ok = BoundedTransport(httpx.MockTransport(lambda r: httpx.Response(200, content=big[:100])), 1000)
    with httpx.Client(transport=ok) as http:
        assert http.get("http://pd.example/x").content == big[:100]
