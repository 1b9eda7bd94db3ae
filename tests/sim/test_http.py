"""sim/http.py: the JSON handler base the sims share, and the main that serves until interrupted."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sim.clouds.hetzner import FakeHetzner
from sim.clouds.ocm import FakeOcm
from sim.http import JSON, BadJson, Drop, HttpError, JsonHandler, Server, answering_handler, parse_json
from sim.kube import apiserver
from sim.kube.store import Store
from sim.tidb.server import TidbServer

REPO = Path(__file__).resolve().parents[2]


class _Echo(JsonHandler):
    """Answers POST /echo with the body it read, and the other paths with what they name."""

    methods = ("GET", "POST")

    def error_body(self, code: int, message: str) -> Any:
        return {"kind": "Error", "code": code, "reason": message}

    def dispatch(self, method: str) -> None:
        if self.path == "/echo":
            self.send_json(200, {"got": self.read_json(empty="nothing")})
        elif self.path == "/teapot":
            raise self.error(418, "short and stout")
        elif self.path == "/drop":
            raise Drop()
        elif self.path == "/none":
            self.send_empty(204, {"X-Trace": "1"})
        elif self.path == "/null":
            self.send_json(200, None)
        elif self.path == "/text":
            self.send_json(200, b'{"already":"encoded"}')
        else:
            raise HttpError(404, "plain")


@contextmanager
def _serve(handler: type[JsonHandler]) -> Iterator[tuple[str, int]]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    with _serve(_Echo) as where:
        yield where


def _ask(
    where: tuple[str, int], method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPConnection(*where, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def test_parse_json_gives_the_empty_value_for_no_bytes_and_names_the_problem() -> None:
    assert parse_json(b"", {}) == {} and parse_json(b"") is None
    assert parse_json(b'{"a": [1]}') == {"a": [1]}
    with pytest.raises(BadJson, match=r"line 1 column 2 \(char 1\)") as err:
        parse_json(b"{nope")
    assert isinstance(err.value, ValueError)  # the sims' own `except ValueError` still take it


def test_reads_the_body_and_answers_compact_json_with_its_length(echo: tuple[str, int]) -> None:
    status, headers, body = _ask(echo, "POST", "/echo", b'{"a": 1, "b": [true, null]}')
    assert status == 200 and body == b'{"got":{"a":1,"b":[true,null]}}'
    assert headers["Content-Type"] == JSON and headers["Content-Length"] == str(len(body))
    assert _ask(echo, "POST", "/echo")[2] == b'{"got":"nothing"}'  # no body: the caller's empty value


def test_a_body_that_is_not_json_is_refused_with_400_in_the_sims_error_shape(echo: tuple[str, int]) -> None:
    status, _, body = _ask(echo, "POST", "/echo", b'{"a": }')
    assert status == 400
    assert json.loads(body) == {
        "kind": "Error",
        "code": 400,
        "reason": "the request body is not valid JSON: Expecting value: line 1 column 7 (char 6)",
    }


def test_errors_raised_in_a_handler_are_answered(echo: tuple[str, int]) -> None:
    status, _, body = _ask(echo, "GET", "/teapot")
    assert (status, json.loads(body)) == (418, {"kind": "Error", "code": 418, "reason": "short and stout"})
    status, _, body = _ask(echo, "GET", "/elsewhere")
    assert (status, body) == (404, b'"plain"')  # a body given as is


def test_no_body_null_bytes_as_given_and_extra_headers(echo: tuple[str, int]) -> None:
    status, headers, body = _ask(echo, "GET", "/none")
    assert (status, body, headers["Content-Length"], headers["X-Trace"]) == (204, b"", "0", "1")
    assert "Content-Type" not in headers  # empty_content_type None
    assert _ask(echo, "GET", "/text")[2] == b'{"already":"encoded"}'
    status, headers, body = _ask(echo, "GET", "/null")  # released PD answers null this way
    assert (status, body, headers["Content-Type"]) == (200, b"null", JSON)


def test_methods_the_sim_lacks_get_the_stdlib_501(echo: tuple[str, int]) -> None:
    status, headers, _ = _ask(echo, "DELETE", "/echo")
    assert status == 501 and headers["Content-Type"].startswith("text/html")


def test_drop_closes_the_connection_without_an_answer(echo: tuple[str, int]) -> None:
    with pytest.raises(http.client.RemoteDisconnected):
        _ask(echo, "GET", "/drop")
    assert _ask(echo, "POST", "/echo", b"1")[0] == 200  # the server goes on


class _Sim:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any, dict[str, str], float]:  # fmt: skip
        self.seen.append((method, path, headers, body))
        if path == "/gone":
            raise Drop()
        return (204, None, {}, 0.0) if method == "DELETE" else (201, {"a": 1}, {"RateLimit-Limit": "3600"}, 0.01)


def test_answering_handler_hands_requests_to_the_sim_and_keeps_its_wire_details() -> None:
    sim = _Sim()
    handler = answering_handler(sim, ("POST", "DELETE"), None, JSON)
    with _serve(handler) as where:
        status, headers, body = _ask(where, "POST", "/v1/x?page=2", b"{}", {"Authorization": "Bearer t"})
        assert (status, body, headers["RateLimit-Limit"]) == (201, b'{"a": 1}', "3600")  # Python's spacing
        method, path, seen_headers, seen_body = sim.seen[-1]
        assert (method, path, seen_headers["authorization"], seen_body) == ("POST", "/v1/x?page=2", "Bearer t", b"{}")
        status, headers, body = _ask(where, "DELETE", "/v1/x/1")
        assert (status, body, headers["Content-Type"]) == (204, b"", JSON)  # a body-less answer still typed
        assert _ask(where, "GET", "/v1/x")[0] == 501
        with pytest.raises(http.client.RemoteDisconnected):
            _ask(where, "POST", "/gone")


SERVE = textwrap.dedent(
    """
    import contextlib
    from sim.http import serve_until_interrupted

    @contextlib.contextmanager
    def serving():
        print("started", flush=True)
        try:
            yield "thing"
        finally:
            print("stopped", flush=True)

    raise SystemExit(serve_until_interrupted(serving(), lambda thing: f"ready: {thing}"))
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_until_interrupted_stops_cleanly_on_a_signal(sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "started\n"
        assert proc.stdout.readline() == "ready: thing\n"  # blocks until the line is there
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0
        assert proc.stdout.read() == "stopped\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_server_keeps_a_burst_of_connections_waiting_to_be_accepted() -> None:
    # Not serving: every connection waits in the accept backlog. socketserver's is 5, and the
    # kernel drops the sixth handshake, which the client resends after a second (then 3 s, 7 s).
    server = Server(("127.0.0.1", 0), _Echo)
    socks: list[socket.socket] = []
    try:
        for _ in range(64):
            socks.append(socket.create_connection(server.server_address[:2], timeout=2))
    finally:
        for sock in socks:
            sock.close()
        server.server_close()
    assert len(socks) == 64


def test_every_sim_serves_with_the_shared_server() -> None:
    with FakeHetzner() as hetzner, FakeOcm() as ocm:
        tidb = TidbServer(Store())
        try:
            servers = [hetzner._httpd, ocm._httpd, tidb.httpd]
            assert all(isinstance(s, Server) for s in servers), servers
        finally:
            tidb.httpd.server_close()
    assert issubclass(apiserver._Server, Server)
