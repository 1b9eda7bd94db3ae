"""An emulated kube-apiserver over HTTPS/1.1 (JSON) that the official client and kubectl talk to.

Routing follows the real URL layout: /api/v1/... for the core group, /apis/{group}/{version}/...
otherwise, with namespaced paths under namespaces/{ns}/. Control endpoints for tests live
under /sim/v1/ and need no token; everything else except /version, health checks and the
kube-public cluster-info ConfigMap (what `kubeadm join` reads before it has credentials) needs
`Authorization: Bearer <token>`, or the answer is 401 like a real cluster's.

TLS: a CA and a serving certificate are generated at start (sim/kube/tls.py); the handshake
runs in the connection's own thread, so a slow client never blocks accepting others, and
connections stay open between requests (the official client's urllib3 pool reuses them).
Reads answer a meta.k8s.io Table when asked (sim/kube/tables.py), and /openapi/v2 and v3
say enough for kubectl's validation (sim/kube/openapi.py).
"""

from __future__ import annotations

import base64
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sim.http import JSON, JsonHandler, Server
from sim.kube import openapi, tables, tls, validation
from sim.kube.control import FakeControl
from sim.kube.errors import ApiError, bad_request, success
from sim.kube.selectors import SelectorError, fields_match, labels_match, parse_field_selector, parse_label_selector
from sim.kube.store import ALL_CATEGORY, Obj, ResourceType, Store, WatchEvent

VERSION_INFO = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0-sim",
    "gitCommit": "0" * 40,
    "gitTreeState": "clean",
    "buildDate": "2024-08-13T00:00:00Z",
    "goVersion": "go1.22.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}
PUBLIC_PATHS = {"/version", "/healthz", "/readyz", "/livez"}
# Readable without credentials, as kubeadm's RBAC allows system:anonymous: the join discovery.
ANONYMOUS_GET = {"/api/v1/namespaces/kube-public/configmaps/cluster-info"}
WATCH_SLICE = 0.5  # how often an idle watch checks for shutdown and a vanished client
FRESH_TIMEOUT = 3.0  # the watch cache's blockTimeout: how long a watch from a future resourceVersion waits
# A watch that allows bookmarks gets one every `watch_bookmark_interval` (FakeControl, 60 s like the
# apiserver's bookmarkFrequency) and one just before it ends (cacher.go: deadline - 2 s).


# kube-apiserver's --max-request-body-bytes default (3 MiB): a longer body is 413 unread.
MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
DISCARD_LIMIT = 64 * 1024 * 1024


class _Server(Server):
    allow_reuse_address = True
    api: ApiServer
    ssl_context: ssl.SSLContext

    def get_request(self) -> tuple[socket.socket, Any]:
        # The handshake happens on the first read, in the connection's thread (not here, in
        # the accept loop).
        sock, addr = self.socket.accept()
        self.api.accepted += 1  # connections, not requests: keep-alive keeps this small
        return self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # failed handshakes (plain HTTP, a client that distrusts the CA) are the client's


class _Route:
    def __init__(self, rt: ResourceType, ns: str | None, name: str | None, sub: str | None) -> None:
        self.rt, self.ns, self.name, self.sub = rt, ns, name, sub


class ApiServer:
    def __init__(
        self,
        store: Store,
        control: FakeControl,
        token: str | None,
        host: str = "127.0.0.1",
        port: int = 0,
        certs: tls.ServingCerts | None = None,
    ) -> None:
        self.store = store
        self.control = control
        self.token = token
        self.certs = certs or tls.generate()
        self.stopping = threading.Event()
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        self.accepted = 0
        self.watches_started = 0  # watch responses begun (tests cut a watch once it is live)
        self.httpd = _Server((host, port), _Handler)
        self.httpd.api = self
        self.httpd.ssl_context = self.certs.server_context()
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"https://{host}:{port}"

    def start(self) -> None:
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="sim-apiserver", daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        with self.store.cond:
            self.store.cond.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.conn_lock:
            for conn in list(self.connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        if self.thread:
            self.thread.join(timeout=5)


def too_large(rv: int, current: int) -> Obj:
    """The Status of a watch from a resourceVersion the store has not reached (retry after 1 s)."""
    status = ApiError(
        504,
        "Timeout",
        f"Too large resource version: {rv}, current: {current}",
        causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
    ).status()
    status["details"]["retryAfterSeconds"] = 1
    return status


def _first(query: dict[str, list[str]], key: str, default: str = "") -> str:
    values = query.get(key)
    return values[0] if values else default


def _flag(query: dict[str, list[str]], key: str) -> bool:
    """A boolean query parameter as the API server converts it (apimachinery pkg/runtime/
    conversion.go Convert_Slice_string_To_bool): absent, "0" or "false" in any case is false,
    anything else is true. kubernetes-client 36 sends `watch=True`."""
    values = query.get(key)
    return bool(values) and values[0] != "0" and values[0].lower() != "false"


class _Handler(JsonHandler):
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.api.conn_lock:
            self.server.api.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.api.conn_lock:
            self.server.api.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    # ---- plumbing -------------------------------------------------------------------------
    def send_bytes(
        self, code: int, data: bytes, content_type: str | None = JSON, headers: Mapping[str, str] | None = None
    ) -> None:
        # kube-apiserver's headers (no Server or Date), in one write: no Nagle/delayed-ACK stall.
        if self.command != "GET":
            self.server.api.store.sync()  # acknowledged writes are durable (etcd answers after its fsync)
        typed = f"Content-Type: {content_type}\r\n" if content_type is not None else ""
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"HTTP/1.1 {code} {self.responses.get(code, ('',))[0]}\r\n"
            f"{typed}Content-Length: {len(data)}\r\n"
            f"Cache-Control: no-cache, private\r\n{extra}{self._warnings}\r\n"
        ).encode()
        self.wfile.write(head + data)
        self._status = code

    def _discard(self, length: int) -> None:
        """Read a refused body away, never keeping it, so the client sees the answer rather than
        a reset; past DISCARD_LIMIT the connection is closed instead."""
        self.close_connection = True
        if length > DISCARD_LIMIT:
            return
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 20))
            if not chunk:
                return
            length -= len(chunk)

    def json_error(self, problem: str) -> Exception:
        return bad_request("the request body is not valid JSON")

    def dispatch(self, method: str) -> None:
        api = self.server.api
        started = time.perf_counter()
        self._status = 0
        self._warnings = ""  # Warning: header lines for the answer
        self._verb, self._resource = method.lower(), "other"
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        query = parse_qs(parts.query, keep_blank_values=True)
        try:
            length = self.headers.get("Content-Length") or ""
            if length.isdigit() and int(length) > MAX_REQUEST_BODY_BYTES:
                self._discard(int(length))
                raise ApiError(
                    413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}"
                )
            body = self.read_json()
            if not path.startswith("/sim/v1"):
                api.control.hold(method, path, body)  # an injected hang (control.RequestHold)
            if path.startswith("/sim/v1"):
                self._verb, self._resource = "control", path
                self._control(method, path, body)
            elif path in PUBLIC_PATHS:
                self.send_json(200, VERSION_INFO if path == "/version" else b"ok")
            elif (
                api.token
                and self.headers.get("Authorization") != f"Bearer {api.token}"
                and not (method == "GET" and path in ANONYMOUS_GET)
            ):
                raise ApiError(401, "Unauthorized", "Unauthorized")
            elif (failure := api.control.take_failure(method, path)) is not None:
                raise ApiError(failure.status, failure.reason, failure.message)
            elif path.startswith("/openapi/"):
                self._verb, self._resource = "get", "openapi"
                self._openapi(path)
            else:
                self._api(method, path, query, body)
        except ApiError as exc:
            self.send_json(exc.code, exc.status())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug here must surface as a 500, not a hung client
            self.send_json(500, ApiError(500, "InternalError", f"sim apiserver error: {exc!r}").status())
        api.control.record(self._verb, self._resource, self._status, time.perf_counter() - started)

    # ---- control API ----------------------------------------------------------------------
    def _control(self, method: str, path: str, body: Any) -> None:
        control = self.server.api.control
        store = self.server.api.store
        try:
            if path == "/sim/v1/stats" and method == "GET":
                with store.lock:
                    objects = {f"{g}/{p}" if g else p: len(b) for (g, p), b in store.storage.items()}
                    rv = store.rv
                self.send_json(
                    200,
                    {
                        **control.stats(),
                        "objects": objects,
                        "resource_version": rv,
                        "connections_accepted": self.server.api.accepted,
                    },
                )
            elif path == "/sim/v1/stats" and method == "DELETE":
                control.reset_stats()
                self.send_json(200, control.stats())
            elif path == "/sim/v1/faults" and method == "GET":
                self.send_json(200, control.faults())
            elif path == "/sim/v1/faults" and method in ("POST", "PUT"):
                control.set_faults(body or {})
                self.send_json(200, control.faults())
            elif path == "/sim/v1/faults" and method == "DELETE":
                control.set_faults({"never_ready_nodes": [], "request_failures": [], "request_holds": []})
                self.send_json(200, control.faults())
            elif path == "/sim/v1/settings" and method == "GET":
                self.send_json(200, control.settings())
            elif path == "/sim/v1/settings" and method in ("POST", "PUT", "PATCH"):
                control.apply_settings(body or {})
                self.send_json(200, control.settings())
            else:
                raise ApiError(404, "NotFound", f"no control endpoint {method} {path}")
        except KeyError as exc:
            raise bad_request(f"missing field {exc}") from None
        except (TypeError, ValueError) as exc:
            raise bad_request(str(exc)) from None

    # ---- Kubernetes API -------------------------------------------------------------------
    def _api(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> None:
        store = self.server.api.store
        seg = path.strip("/").split("/")
        if seg == ["api"]:
            self.send_json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": self.server.api.url.split("//")[1]}
                    ],
                },
            )
            return
        if seg == ["apis"]:
            self.send_json(200, self._group_list())
            return
        if seg[0] == "api" and len(seg) >= 2:
            group, version, rest = "", seg[1], seg[2:]
        elif seg[0] == "apis" and len(seg) >= 3:
            group, version, rest = seg[1], seg[2], seg[3:]
        elif seg[0] == "apis" and len(seg) == 2:
            groups = [g for g in self._group_list()["groups"] if g["name"] == seg[1]]
            if not groups:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            self.send_json(200, {"kind": "APIGroup", "apiVersion": "v1", **groups[0]})
            return
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            self.send_json(200, self._resource_list(group, version))
            return
        route = self._route(group, version, rest)
        self._resource = route.rt.plural + (f"/{route.sub}" if route.sub else "")
        dry_run = query.get("dryRun") or []
        if any(v != "All" for v in dry_run):
            raise ApiError(400, "BadRequest", f'Invalid value: {dry_run!r}: supported values: "All"')
        if dry_run and method != "GET":
            with store.dry_run():  # validated and answered; nothing stored
                self._resource_call(method, route, query, body)
        else:
            self._resource_call(method, route, query, body)

    def _resource_call(self, method: str, route: _Route, query: dict[str, list[str]], body: Any) -> None:
        store = self.server.api.store
        rt = route.rt
        if route.name is None:
            if rt.namespaced and route.ns is None and method != "GET":
                raise ApiError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            if method == "GET":
                if _flag(query, "watch"):
                    self._verb = "watch"
                    self._watch(rt, route.ns, query)
                else:
                    self._verb = "list"
                    self._list(rt, route.ns, query)
            elif method == "POST":
                self._verb = "create"
                self._check_fields(rt, body, query)
                self.send_json(201, store.create(rt, route.ns or "", self._object(body)))
            elif method == "DELETE":
                self._verb = "deletecollection"
                items, _ = store.list(rt, route.ns, *self._selectors(rt, query))
                for item in items:
                    meta = item["metadata"]
                    try:
                        store.delete(rt, meta.get("namespace", ""), meta["name"], body)
                    except ApiError as exc:
                        if exc.code != 404:
                            raise
                self.send_json(
                    200,
                    {
                        "kind": rt.list_kind,
                        "apiVersion": rt.api_version,
                        "metadata": {"resourceVersion": str(store.rv)},
                        "items": items,
                    },
                )
            else:
                raise ApiError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            return
        ns, name, sub = route.ns or "", route.name, route.sub
        if sub == "scale" and rt.group == "apps" and rt.plural in ("deployments", "replicasets", "statefulsets"):
            self._scale(method, rt, ns, name, body)
            return
        if sub not in (None, "status", "binding", "eviction"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub in ("binding", "eviction"):
            if rt.plural != "pods" or rt.group != "" or method != "POST":
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            payload = self._object(body)
            if sub == "binding":
                self._verb = "bind"
                target = (payload.get("target") or {}).get("name")
                if not target:
                    raise ApiError(422, "Invalid", "target.name: Required value")
                store.bind(ns, name, target)
            else:
                self._verb = "evict"
                store.evict(ns, name)
            self.send_json(201, success(201))
            return
        if sub == "status" and not rt.status_subresource:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET":
            self._verb = "get"
            obj = store.get(rt, ns, name)
            version = tables.table_version(self.headers.get("Accept"))
            if version is not None and sub is None:
                self.send_json(
                    200,
                    tables.table(
                        self._printer(rt),
                        [obj],
                        version=version,
                        include=_first(query, "includeObject", "Metadata"),
                        list_meta={"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                    ),
                )
            else:
                self.send_json(200, obj)
        elif method == "PUT":
            self._verb = "update"
            self._check_fields(rt, body, query)
            self.send_json(200, store.replace(rt, ns, name, self._object(body), sub))
        elif method == "PATCH":
            self._verb = "patch"
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if body is None:
                raise bad_request("a patch needs a body")
            if content_type != "application/json-patch+json":
                self._check_fields(rt, body, query)
            self.send_json(200, store.patch(rt, ns, name, content_type, body, sub))
        elif method == "DELETE" and sub is None:
            self._verb = "delete"
            obj, now = store.delete(rt, ns, name, body if isinstance(body, dict) else None)
            self.send_json(200 if now else 202, obj)
        else:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    @staticmethod
    def _object(body: Any) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        return body

    def _route(self, group: str, version: str, rest: list[str]) -> _Route:
        store = self.server.api.store
        not_found = ApiError(404, "NotFound", "the server could not find the requested resource")
        if rest[0] == "namespaces" and len(rest) >= 3:
            rt = store.lookup(group, version, rest[2])
            if rt is not None and rt.namespaced and len(rest) <= 5:
                return _Route(rt, rest[1], rest[3] if len(rest) > 3 else None, rest[4] if len(rest) > 4 else None)
        rt = store.lookup(group, version, rest[0])
        if rt is None or len(rest) > 3 or (rt.namespaced and len(rest) > 1):
            raise not_found
        return _Route(rt, None, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None)

    def _selectors(self, rt: ResourceType, query: dict[str, list[str]]) -> tuple[list[Any], list[Any]]:
        try:
            return (
                parse_label_selector(_first(query, "labelSelector")),
                parse_field_selector(_first(query, "fieldSelector"), rt.plural),
            )
        except SelectorError as exc:
            raise bad_request(str(exc)) from None

    def _list(self, rt: ResourceType, ns: str | None, query: dict[str, list[str]]) -> None:
        store = self.server.api.store
        labels, fields = self._selectors(rt, query)
        items, rv = store.list(rt, ns, labels, fields)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        token = _first(query, "continue")
        if token:
            try:
                after = tuple(json.loads(base64.urlsafe_b64decode(token.encode())))
            except ValueError:
                raise ApiError(400, "BadRequest", "invalid continue token") from None
            items = [i for i in items if (i["metadata"].get("namespace", ""), i["metadata"]["name"]) > after]
        limit = int(_first(query, "limit") or 0)
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps([last.get("namespace", ""), last["name"]]).encode()
            ).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        version = tables.table_version(self.headers.get("Accept"))
        if version is not None:
            self.send_json(
                200,
                tables.table(
                    self._printer(rt),
                    items,
                    version=version,
                    list_meta=meta,
                    include=_first(query, "includeObject", "Metadata"),
                ),
            )
            return
        # The text json.dumps would give the list, with each item's text as the store has it.
        head = json.dumps({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta}, separators=(",", ":"))
        self.send_json(200, f'{head[:-1]},"items":{store.encode_items(rt, items)}}}'.encode())

    def _scale(self, method: str, rt: ResourceType, ns: str, name: str, body: Any) -> None:
        store = self.server.api.store
        self._resource = f"{rt.plural}/scale"
        if method in ("PUT", "PATCH"):
            self._verb = "update" if method == "PUT" else "patch"
            replicas = (self._object(body).get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise ApiError(422, "Invalid", "spec.replicas: must be a non-negative integer")
            store.get(rt, ns, name)

            def set_replicas(obj: Obj) -> Obj:
                obj.setdefault("spec", {})["replicas"] = replicas
                return obj

            store.mutate(rt, ns, name, set_replicas)
        elif method != "GET":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        obj = store.get(rt, ns, name)
        selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        self.send_json(
            200,
            {
                "kind": "Scale",
                "apiVersion": "autoscaling/v1",
                "metadata": {
                    k: obj["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                },
                "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
                "status": {
                    "replicas": (obj.get("status") or {}).get("replicas", 0),
                    "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items())),
                },
            },
        )

    # ---- watch ----------------------------------------------------------------------------
    def _watch(self, rt: ResourceType, ns: str | None, query: dict[str, list[str]]) -> None:
        api = self.server.api
        store = api.store
        labels, fields = self._selectors(rt, query)
        timeout = float(_first(query, "timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        rv_text = _first(query, "resourceVersion")

        everything = ns is None and not labels and not fields  # an informer's watch: no selector

        def matches(obj: Obj | None) -> bool:
            if everything:
                return obj is not None
            return (
                obj is not None
                and (ns is None or obj["metadata"].get("namespace") == ns)
                and labels_match(labels, obj)
                and fields_match(fields, obj)
            )

        initial: list[tuple[str, Obj]] = []
        with store.lock:
            if rv_text in ("", "0"):
                items, position = store.list(rt, ns, labels, fields)
                initial = [("ADDED", item) for item in items]
            else:
                try:
                    position = int(rv_text)
                except ValueError:
                    raise bad_request(f"invalid resource version: {rv_text}") from None
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\nCache-Control: no-cache, private\r\n\r\n"
        )
        self._status = 200
        self.close_connection = True
        api.watches_started += 1
        version = tables.table_version(self.headers.get("Accept"))
        printer = self._printer(rt) if version is not None else None
        include = _first(query, "includeObject", "Metadata")
        first = [True]  # a Table watch sends its columns once, like the apiserver

        def encode(kind: str, obj: Obj, event: WatchEvent | None = None) -> bytes:
            if printer is None and event is not None and obj is event.obj:
                # The store's encoding of the committed object, shared with the journal and the
                # other watchers: the same bytes as encoding the event here.
                return f'{{"type":"{kind}","object":{event.encoded()}}}\n'.encode()
            if printer is not None and kind not in ("ERROR", "BOOKMARK"):
                obj = tables.table(
                    printer,
                    [obj],
                    version=version or "v1",
                    include=include,
                    list_meta={"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                    headers=first[0],
                )
                first[0] = False
            return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"

        def send(events: list[tuple[str, Obj]] | list[tuple[str, Obj, WatchEvent]]) -> None:
            # One chunk per event, as kube-apiserver flushes after each: clients split lines
            # per chunk (kubernetes.watch.iter_resp_lines copies the rest of a chunk for each
            # line, so thousands of events in one chunk cost it seconds). One write for all.
            if events:
                lines = [encode(*e) for e in events]
                self.wfile.write(b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in lines))

        def classify(event: WatchEvent) -> tuple[str, Obj, WatchEvent] | None:
            if event.gr != rt.gr:
                return None
            new_match = matches(event.obj)
            old_match = matches(event.old)
            obj = event.obj
            if rt.gr == ("policy", "poddisruptionbudgets"):
                obj = store._decorate(rt, obj)
            if event.type == "ADDED":
                return ("ADDED", obj, event) if new_match else None
            if event.type == "DELETED":
                return ("DELETED", obj, event) if (new_match or old_match) else None
            if new_match and old_match:
                return ("MODIFIED", obj, event)
            if new_match:
                return ("ADDED", obj, event)
            if old_match:
                return ("DELETED", obj, event)
            return None

        bookmarks = _flag(query, "allowWatchBookmarks")

        def next_bookmark_after(now: float) -> float:
            nxt = now + max(0.05, api.control.watch_bookmark_interval)
            last_call = deadline - 2  # the one just before the watch ends
            return last_call if now < last_call < nxt else nxt

        next_bookmark = next_bookmark_after(time.monotonic())

        def bookmark() -> tuple[str, Obj]:
            # Only the version: "everything of this kind up to here was sent".
            return (
                "BOOKMARK",
                {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(position)}},
            )

        try:
            send(initial)
            if position > store.rv and not self._wait_fresh(position):
                # A resourceVersion this store never reached (e.g. restored from an older data
                # dir): the watch cache waits 3 s, then ends the watch with 504 Timeout.
                send([("ERROR", too_large(position, store.rv))])
                self.wfile.write(b"0\r\n\r\n")
                return
            while not api.stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if bookmarks and time.monotonic() >= next_bookmark:
                    send([bookmark()])
                    next_bookmark = next_bookmark_after(time.monotonic())
                with store.cond:
                    if store.rv <= position:
                        wait = min(WATCH_SLICE, remaining)
                        if bookmarks:
                            wait = max(0.0, min(wait, next_bookmark - time.monotonic()))
                        store.cond.wait(wait)
                    events, ok = store.events_after(position)
                    if not ok:
                        gone = ApiError(
                            410, "Expired", f"too old resource version: {position} ({store.oldest_rv()})"
                        ).status()
                        send([("ERROR", gone)])
                        break
                    out = [c for c in map(classify, events) if c is not None]
                    if events:
                        position = events[-1].rv
                send(out)
                if not events and self._client_gone():
                    break
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass

    def _wait_fresh(self, rv: int) -> bool:
        store = self.server.api.store
        deadline = time.monotonic() + FRESH_TIMEOUT
        with store.cond:
            while store.rv < rv and (left := deadline - time.monotonic()) > 0:
                store.cond.wait(left)
            return store.rv >= rv

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            # Peek at the TCP stream under TLS (SSLSocket.recv takes no flags): b"" is the FIN.
            return bool(readable) and socket.socket.recv(self.connection, 1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _check_fields(self, rt: ResourceType, body: Any, query: dict[str, list[str]]) -> None:
        """fieldValidation for custom resources: Strict refuses unknown fields, Warn warns."""
        directive = _first(query, "fieldValidation", "Warn")
        if rt.builtin or directive == "Ignore" or not isinstance(body, dict):
            return
        unknown = validation.unknown_fields(body, self._crd_version(rt).get("schema", {}).get("openAPIV3Schema"))
        if not unknown:
            return
        if directive == "Strict":
            raise bad_request("strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown))
        self._warnings = "".join(f'Warning: 299 - "unknown field \\"{u}\\""\r\n' for u in unknown)

    def _crd_version(self, rt: ResourceType) -> Obj:
        crds = self.server.api.store.builtin("customresourcedefinitions", "apiextensions.k8s.io")
        crd = self.server.api.store.find(crds, "", f"{rt.plural}.{rt.group}") or {}
        versions = (crd.get("spec") or {}).get("versions") or []
        return next((v for v in versions if v.get("name") == rt.version), {})

    # ---- printing and OpenAPI -------------------------------------------------------------
    def _printer(self, rt: ResourceType) -> tables.Printer:
        if rt.builtin:
            return tables.BUILTIN_PRINTERS.get(rt.gr, tables.DEFAULT_PRINTER)
        return tables.crd_printer(self._crd_version(rt))

    def _openapi_docs(self) -> dict[str, Obj]:
        store = self.server.api.store
        by_gv: dict[str, list[ResourceType]] = {}
        for rt in list(store.types.values()):
            by_gv.setdefault(openapi.gv_path(rt.group, rt.version), []).append(rt)
        crds = store.builtin("customresourcedefinitions", "apiextensions.k8s.io")
        schemas: dict[tuple[str, str, str], Obj] = {}
        for crd in store.all(crds):
            spec = crd.get("spec") or {}
            for v in spec.get("versions") or []:
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
                if schema:
                    schemas[(spec.get("group", ""), v.get("name", ""), (spec.get("names") or {}).get("plural", ""))] = (
                        schema
                    )
        return {path: openapi.group_version_doc(types, schemas) for path, types in by_gv.items()}

    def _openapi(self, path: str) -> None:
        if path == "/openapi/v2":
            if openapi.OPENAPI_V2_PROTOBUF in (self.headers.get("Accept") or ""):
                # Go's mime parser refuses the '@' of the requested type (kubectl 1.27 fails on it).
                self.send_bytes(200, openapi.V2_PROTOBUF, "application/octet-stream")
            else:
                self.send_json(200, openapi.v2_json(self._openapi_docs()))
            return
        docs = self._openapi_docs()
        if path == "/openapi/v3":
            self.send_json(200, openapi.v3_root(docs))
        elif path.removeprefix("/openapi/v3/") in docs:
            self.send_json(200, docs[path.removeprefix("/openapi/v3/")])
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

    # ---- discovery ------------------------------------------------------------------------
    def _group_list(self) -> Obj:
        versions: dict[str, list[str]] = {}
        for group, version, _ in list(self.server.api.store.types):
            if group and version not in versions.setdefault(group, []):
                versions[group].append(version)
        groups = []
        for group, vs in sorted(versions.items()):
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in vs]
            groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _resource_list(self, group: str, version: str) -> Obj:
        types = [t for (g, v, _), t in list(self.server.api.store.types.items()) if g == group and v == version]
        if not types:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        resources: list[Obj] = []
        for t in sorted(types, key=lambda t: t.plural):
            resources.append(
                {
                    "name": t.plural,
                    "singularName": t.singular or t.kind.lower(),
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": verbs,
                    "shortNames": list(t.short_names),
                    **({"categories": ["all"]} if t.gr in ALL_CATEGORY else {}),
                }
            )
            if t.status_subresource:
                resources.append(
                    {
                        "name": f"{t.plural}/status",
                        "singularName": "",
                        "namespaced": t.namespaced,
                        "kind": t.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if t.gr == ("", "pods"):
                resources.append(
                    {
                        "name": "pods/binding",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Binding",
                        "verbs": ["create"],
                    }
                )
                resources.append(
                    {
                        "name": "pods/eviction",
                        "singularName": "",
                        "namespaced": True,
                        "group": "policy",
                        "version": "v1",
                        "kind": "Eviction",
                        "verbs": ["create"],
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }
