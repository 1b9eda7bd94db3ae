"""The HTTP plumbing the sim servers share: a JSON request handler and a main that serves until interrupted.

Each sim speaks a real API, so the wire details stay theirs: the JSON spacing (``separators``), whether a
body-less answer still names a Content-Type, which methods exist (any other gets the stdlib's 501), and
the shape of an error body (``error_body``). What is common is reading the body, parsing it with an
answer that names the problem, writing the answer with Content-Type and Content-Length, answering an
``HttpError`` raised anywhere in a handler, and dropping the connection without an answer (``Drop``).
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Protocol, TypeVar

JSON = "application/json"
T = TypeVar("T")


class Server(ThreadingHTTPServer):
    """A thread per connection, listening with a real server's accept backlog. socketserver listens
    with 5; Go's net/http (kube-apiserver, Prometheus, PD, the clouds' APIs) with the system's
    somaxconn. Past 5 connections not yet accepted the kernel drops the handshake and the client
    sends its SYN again after 1, 3, 7 s: a burst of new connections (a worker's client pools
    refilling, a Prometheus scraping a thousand pods) waited seconds on a sim that had time."""

    daemon_threads = True
    request_queue_size = socket.SOMAXCONN


class HttpError(Exception):
    """An answer other than success: ``body`` is already in the sim's error shape."""

    def __init__(self, code: int, body: Any) -> None:
        super().__init__(str(body))
        self.code = code
        self.body = body


class Drop(Exception):
    """Close the connection without an answer (a response lost on the way back)."""


class BadJson(ValueError):
    """A request body that is not JSON; the message is the parser's, naming where it broke."""


def parse_json(raw: bytes, empty: Any = None) -> Any:
    """The JSON value of a request body; ``empty`` for a body of no bytes (clients send none on GET)."""
    if not raw:
        return empty
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise BadJson(str(exc)) from None


class JsonHandler(BaseHTTPRequestHandler):
    """A keep-alive handler whose ``dispatch(method)`` answers with ``send_json``."""

    protocol_version = "HTTP/1.1"
    methods: ClassVar[tuple[str, ...]] = ("GET", "POST", "PUT", "PATCH", "DELETE")
    separators: ClassVar[tuple[str, str] | None] = (",", ":")  # None: Python's ", " and ": "
    empty_content_type: ClassVar[str | None] = None  # what a body-less answer (send_empty) says it holds

    def __getattr__(self, name: str) -> Any:
        # http.server looks up do_<METHOD>: this sim's methods are served, any other gets its 501.
        if name.startswith("do_") and name[3:] in self.methods:
            return self._serve
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        return  # quiet: tests and the demos print their own summaries

    def dispatch(self, method: str) -> None:
        raise NotImplementedError

    def _serve(self) -> None:
        try:
            self.dispatch(self.command)
        except HttpError as exc:
            self.send_json(exc.code, exc.body)
        except (Drop, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # ---- the sim's error shape ---------------------------------------------------------------
    def error_body(self, code: int, message: str) -> Any:
        """The body of an error answer in this sim's shape."""
        return {"error": message}

    def error(self, code: int, message: str) -> HttpError:
        return HttpError(code, self.error_body(code, message))

    def json_error(self, problem: str) -> Exception:
        """What a request body that is not JSON raises (answered by ``dispatch``'s caller or the sim)."""
        return self.error(400, f"the request body is not valid JSON: {problem}")

    # ---- reading -----------------------------------------------------------------------------
    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def read_json(self, empty: Any = None) -> Any:
        try:
            return parse_json(self.read_body(), empty)
        except BadJson as exc:
            raise self.json_error(str(exc)) from None

    # ---- writing -----------------------------------------------------------------------------
    def send_json(self, code: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        """``body`` as JSON (None is ``null``); bytes are JSON text already encoded."""
        data = body if isinstance(body, bytes) else json.dumps(body, separators=self.separators).encode()
        self.send_bytes(code, data, JSON, headers)

    def send_empty(self, code: int, headers: Mapping[str, str] | None = None) -> None:
        """An answer without a body (204)."""
        self.send_bytes(code, b"", self.empty_content_type, headers)

    def send_bytes(
        self, code: int, data: bytes, content_type: str | None = JSON, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(code)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class Answers(Protocol):
    def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, Any, dict[str, str], float]:
        """(status, JSON body or None for none, extra headers, delay before answering); raises Drop."""
        ...


def answering_handler(
    sim: Answers,
    methods: tuple[str, ...],
    separators: tuple[str, str] | None,
    empty_content_type: str | None,
) -> type[JsonHandler]:
    """A handler that gives each request (lower-cased headers, raw path) to ``sim.handle``: for sims
    that keep their routing and error shapes beside their state, behind one lock."""

    class Handler(JsonHandler):
        def dispatch(self, method: str) -> None:
            body = self.read_body()
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, payload, extra, delay = sim.handle(method, self.path, headers, body)
            if delay > 0:
                time.sleep(delay)  # outside the sim's lock: other requests go on
            if payload is None:
                self.send_empty(status, extra)
            else:
                self.send_json(status, payload, extra)

    Handler.methods, Handler.separators, Handler.empty_content_type = methods, separators, empty_content_type
    return Handler


def serve_until_interrupted(serving: AbstractContextManager[T], ready: Callable[[T], str]) -> int:
    """Enter ``serving`` (it starts the servers), print ``ready``'s line (what a parent process waits
    for), serve until SIGINT or SIGTERM, then leave it (it stops them). Exit code 0."""
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # installed first: a signal during start-up is kept
        signal.signal(sig, lambda *_: done.set())
    with serving as server:
        print(ready(server), flush=True)
        while not done.wait(0.5):
            pass
    return 0
