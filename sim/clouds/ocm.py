"""A fake OpenShift Cluster Manager (OCM) clusters_mgmt API on 127.0.0.1, for growth's httpx client.

It stands for the outside world, so it never imports growth's packages. What it plays, under
`/api/clusters_mgmt/v1`:

- clusters: POST (name unique, DNS label, length-capped; `external_id` stored), GET list with
  `search` (`name = 'x' and external_id = 'y'`) and page/size, GET/DELETE by id, GET .../status;
  each cluster's state moves on a clock: pending -> installing -> ready (or error), and after a
  DELETE uninstalling -> gone (404);
- per cluster: machine_pools (POST/GET/PATCH/DELETE; replicas or autoscaling min/max, labels,
  taints, availability_zones; multi-AZ counts must be multiples of 3), addons (POST/GET/DELETE;
  installing -> ready | failed), ingresses (the `default` one with its dns_name once the cluster
  is ready), identity_providers (POST/GET; a second one with the same name is refused with 400
  "already exists"), external_configuration/syncsets (POST/GET/PATCH/DELETE);
- OCM's error bodies `{"kind": "Error", "id": "404", "href": ..., "code": "CLUSTERS-MGMT-404",
  "reason": ...}` and bearer-token auth (401);
- fault injection through Python methods or the control API under /sim/v1/: errors with any
  status (429 with Retry-After, 5xx, 400 on create...), slow responses, clusters that end in
  `error`, addons that end in `failed`, creates whose response is lost (the cluster exists, the
  connection closes), and a clock that tests can move forward (`advance`).

Run alone: `python -m sim.clouds.ocm --port 8091 --token sim-ocm-token`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlparse

from sim.http import Drop, Server, answering_handler, parse_json, serve_until_interrupted

API = "/api/clusters_mgmt/v1"
ERRORS_HREF = f"{API}/errors"
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_POOL_ID = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SEARCH_TERM = re.compile(r"^\s*([a-z_.]+)\s*(=|like)\s*'([^']*)'\s*$")
_SEARCHABLE = ("id", "name", "external_id", "state", "region.id", "cloud_provider.id")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_IDP_TYPES = ("OpenIDIdentityProvider", "GithubIdentityProvider", "GoogleIdentityProvider", "HTPasswdIdentityProvider", "LDAPIdentityProvider", "GitlabIdentityProvider")  # fmt: skip
_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout"}  # fmt: skip


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


def ocm_error(status: int, reason: str, operation_id: str = "") -> dict[str, Any]:
    """OCM's error body for an HTTP status."""
    return {
        "kind": "Error",
        "id": str(status),
        "href": f"{ERRORS_HREF}/{status}",
        "code": f"CLUSTERS-MGMT-{status}",
        "reason": reason,
        "operation_id": operation_id,
    }


class OcmError(Exception):
    def __init__(self, status: int, reason: str, retry_after_s: int | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.retry_after_s = retry_after_s


@dataclass
class Fault:
    """The next `count` matching API requests answer `status` (or, with status 0, are only slowed
    by `delay_s`). `path` is a regex searched in the path after /api/clusters_mgmt/v1."""

    status: int
    count: int
    method: str | None = None
    path: str | None = None
    reason: str = "injected fault"
    delay_s: float = 0.0
    retry_after_s: int | None = None

    def matches(self, method: str, sub: str) -> bool:
        if self.count <= 0 or (self.method is not None and self.method != method):
            return False
        return self.path is None or re.search(self.path, sub) is not None


@dataclass
class Timings:
    """Seconds each state lasts, on the sim's clock."""

    pending_s: float = 1.0
    installing_s: float = 2.0
    uninstalling_s: float = 2.0
    addon_install_s: float = 1.0
    ingress_delay_s: float = 0.0  # the default ingress appears this long after the cluster is ready


@dataclass
class _Addon:
    id: str
    parameters: list[dict[str, str]]
    created: float
    fails: bool = False
    deleting_at: float | None = None


@dataclass
class _Cluster:
    id: str
    name: str
    external_id: str
    body: dict[str, Any]
    created: float
    error_message: str = ""  # set: the install ends in `error` with this message
    delete_at: float | None = None
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)
    addons: dict[str, _Addon] = field(default_factory=dict)
    idps: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> body (with the secret)
    syncsets: dict[str, dict[str, Any]] = field(default_factory=dict)


class FakeOcm:
    """The fake API. Start with start() or `with FakeOcm(...) as ocm:`; ocm.url is the base URL
    (the client appends /api/clusters_mgmt/v1/...)."""

    def __init__(
        self,
        token: str | None = "sim-ocm-token",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        timings: Timings | None = None,
        base_domain: str = "sim.example.com",
        max_name_length: int = 15,
        cloud_providers: tuple[str, ...] = ("aws", "gcp"),
    ) -> None:
        self.token = token  # None: no auth required
        self._host, self._port = host, port
        self.timings = timings or Timings()
        self.base_domain = base_domain
        self.max_name_length = max_name_length
        self.cloud_providers = cloud_providers
        self._lock = threading.RLock()
        self._offset = 0.0  # advance() moves the clock forward
        self._clusters: dict[str, _Cluster] = {}
        self._seq = 0
        self._faults: list[Fault] = []
        self._lose_creates = 0
        self._lose_status: int | None = None  # None: lost answers are dropped connections
        self._error_clusters: list[str] = []  # messages for the next creates that end in error
        self._failing_addons: set[str] = set()
        self.requests = 0
        self.requests_by_route: dict[str, int] = {}
        self.clusters_created = 0
        self.clusters_deleted = 0  # gone after uninstalling
        self.delete_requests = 0
        self.lost_responses = 0
        self._httpd: Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeOcm not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeOcm:
        self._httpd = Server(
            (self._host, self._port), answering_handler(self, ("GET", "POST", "PUT", "PATCH", "DELETE"), None, None)
        )
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-ocm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOcm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def now(self) -> float:
        return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the sim's clock forward: states that were due in `seconds` are reached now."""
        with self._lock:
            self._offset += seconds

    # ------------------------------------------------------------------ fault injection

    def inject_fault(
        self,
        status: int,
        count: int = 1,
        *,
        method: str | None = None,
        path: str | None = None,
        reason: str | None = None,
        delay_s: float = 0.0,
        retry_after_s: int | None = None,
    ) -> None:
        """Answer the next `count` matching requests with `status` and an OCM error body."""
        with self._lock:
            why = reason or _REASONS.get(status, "injected fault")
            self._faults.append(Fault(status, count, method, path, why, delay_s, retry_after_s))

    def rate_limit(self, count: int = 1, retry_after_s: int = 1, *, method: str | None = None, path: str | None = None) -> None:  # fmt: skip
        self.inject_fault(429, count, method=method, path=path, retry_after_s=retry_after_s)

    def slow_responses(self, delay_s: float, count: int = 1, *, method: str | None = None, path: str | None = None) -> None:  # fmt: skip
        """The next `count` matching requests are answered normally, `delay_s` late."""
        with self._lock:
            self._faults.append(Fault(0, count, method, path, "slow", delay_s))

    def lose_create_responses(self, count: int = 1, status: int | None = None) -> None:
        """The next `count` cluster creates succeed, but the connection closes before the answer
        (or, with a 5xx `status`, a gateway's error answers instead of the created cluster)."""
        if status is not None and not 500 <= status <= 599:
            raise ValueError(f"status must be a 5xx, not {status}")
        with self._lock:
            self._lose_creates += count
            self._lose_status = status

    def clusters_end_in_error(self, count: int = 1, message: str = "Failed to provision cluster: insufficient quota") -> None:  # fmt: skip
        """The next `count` created clusters end their install in state `error`."""
        with self._lock:
            self._error_clusters.extend([message] * count)

    def fail_addon(self, addon_id: str, fails: bool = True) -> None:
        """Installations of this addon end in `failed` (or, with fails=False, no longer do)."""
        with self._lock:
            (self._failing_addons.add if fails else self._failing_addons.discard)(addon_id)

    def reset_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._lose_creates = 0
            self._error_clusters.clear()
            self._failing_addons.clear()

    # ------------------------------------------------------------------ inspection

    def clusters(self) -> list[dict[str, Any]]:
        """Every cluster the sim still holds (uninstalling ones too), as the API shows them."""
        with self._lock:
            now = self.now()
            self._collect(now)
            return [self._cluster_json(c, now) for c in self._clusters.values()]

    def addon_installations(self) -> list[dict[str, Any]]:
        """Every addon installation with its cluster's ids, state and parameters: what a data
        plane's operator would be handed when OCM installs it (the fake agent reads these)."""
        with self._lock:
            now = self.now()
            self._collect(now)
            return [
                {
                    "cluster_id": c.id,
                    "external_id": c.external_id,
                    "cluster_state": self._state(c, now),
                    "addon_id": a.id,
                    "state": self._addon_state(a, now),
                    "parameters": {p["id"]: p["value"] for p in a.parameters},
                }
                for c in self._clusters.values()
                for a in c.addons.values()
            ]

    def cluster_by_name(self, name: str) -> dict[str, Any] | None:
        return next((c for c in self.clusters() if c["name"] == name), None)

    def stats(self) -> dict[str, Any]:
        """Counts: created, deleted (gone), delete requests, live (not being deleted), leaked:
        more than one live cluster for the same external id (a create that was not idempotent)."""
        with self._lock:
            self._collect(self.now())
            live = [c for c in self._clusters.values() if c.delete_at is None]
            per_external: dict[str, int] = {}
            for c in live:
                if c.external_id:
                    per_external[c.external_id] = per_external.get(c.external_id, 0) + 1
            return {
                "requests": self.requests,
                "requests_by_route": dict(self.requests_by_route),
                "clusters_created": self.clusters_created,
                "clusters_deleted": self.clusters_deleted,
                "delete_requests": self.delete_requests,
                "clusters_live": len(live),
                "clusters_uninstalling": len(self._clusters) - len(live),
                "clusters_leaked": sum(n - 1 for n in per_external.values()),
                "live_external_ids": sorted(per_external),
                "lost_responses": self.lost_responses,
            }

    # ------------------------------------------------------------------ state on the clock

    def _state(self, c: _Cluster, now: float) -> str:
        t = self.timings
        if c.delete_at is not None:
            return "uninstalling"
        if now < c.created + t.pending_s:
            return "pending"
        if now < c.created + t.pending_s + t.installing_s:
            return "installing"
        return "error" if c.error_message else "ready"

    def _ready_at(self, c: _Cluster) -> float:
        return c.created + self.timings.pending_s + self.timings.installing_s

    def _collect(self, now: float) -> None:
        """Clusters whose uninstall finished disappear (404 from then on)."""
        for cid in [k for k, c in self._clusters.items() if c.delete_at and now >= c.delete_at + self.timings.uninstalling_s]:  # fmt: skip
            del self._clusters[cid]
            self.clusters_deleted += 1

    def _addon_state(self, a: _Addon, now: float) -> str:
        if a.deleting_at is not None:
            return "deleting"
        if now < a.created + self.timings.addon_install_s:
            return "installing"
        return "failed" if a.fails else "ready"

    # ------------------------------------------------------------------ JSON shapes

    def _cluster_href(self, c: _Cluster) -> str:
        return f"{API}/clusters/{c.id}"

    def _cluster_json(self, c: _Cluster, now: float) -> dict[str, Any]:
        state = self._state(c, now)
        error = state == "error"
        b = c.body
        return {
            "kind": "Cluster",
            "id": c.id,
            "href": self._cluster_href(c),
            "name": c.name,
            "external_id": c.external_id,
            "state": state,
            "status": self._status_json(c, state),
            "cloud_provider": {"kind": "CloudProviderLink", "id": b["cloud_provider"]["id"],
                               "href": f"{API}/cloud_providers/{b['cloud_provider']['id']}"},
            "region": {"kind": "CloudRegionLink", "id": b["region"]["id"]},
            "multi_az": bool(b.get("multi_az", False)),
            "nodes": b.get("nodes") or {},
            "version": b.get("version") or {"kind": "VersionLink", "id": "openshift-v4.14.0"},
            "product": {"kind": "ProductLink", "id": (b.get("product") or {}).get("id", "osd")},
            "managed": True,
            "ccs": b.get("ccs") or {"enabled": False},
            "dns": {"base_domain": self.base_domain},
            "api": {"url": f"https://api.{c.name}.{self.base_domain}:6443"},
            "console": {"url": f"https://console-openshift-console.apps.{c.name}.{self.base_domain}"} if state == "ready" else {},
            "creation_timestamp": _iso(c.created),
            "provision_error_message": c.error_message if error else "",
        }  # fmt: skip

    def _status_json(self, c: _Cluster, state: str) -> dict[str, Any]:
        error = state == "error"
        return {
            "kind": "ClusterStatus",
            "id": c.id,
            "href": f"{self._cluster_href(c)}/status",
            "state": state,
            "description": c.error_message if error else "",
            "provision_error_code": "OCM3999" if error else "",
            "provision_error_message": c.error_message if error else "",
            "dns_ready": state == "ready",
        }

    def _pool_json(self, c: _Cluster, pool: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "MachinePool", "href": f"{self._cluster_href(c)}/machine_pools/{pool['id']}", **pool}

    def _addon_json(self, c: _Cluster, a: _Addon, now: float) -> dict[str, Any]:
        state = self._addon_state(a, now)
        return {
            "kind": "AddOnInstallation",
            "id": a.id,
            "href": f"{self._cluster_href(c)}/addons/{a.id}",
            "addon": {"kind": "AddOnLink", "id": a.id, "href": f"{API}/addons/{a.id}"},
            "state": state,
            "state_description": "addon install failed: operator CSV in phase Failed" if state == "failed" else "",
            "parameters": {"kind": "AddOnInstallationParameterList", "items": a.parameters},
            "creation_timestamp": _iso(a.created),
        }

    def _ingresses_json(self, c: _Cluster, now: float) -> list[dict[str, Any]]:
        if self._state(c, now) != "ready" or now < self._ready_at(c) + self.timings.ingress_delay_s:
            return []
        return [
            {
                "kind": "Ingress",
                "id": "default",
                "href": f"{self._cluster_href(c)}/ingresses/default",
                "default": True,
                "dns_name": f"apps.{c.name}.{self.base_domain}",
                "listening": "external",
                "load_balancer_type": "classic",
            }
        ]

    def _idp_json(self, c: _Cluster, body: dict[str, Any]) -> dict[str, Any]:
        shown = json.loads(json.dumps(body))
        for section in shown.values():
            if isinstance(section, dict):
                section.pop("client_secret", None)  # OCM never shows it back
        return {"kind": "IdentityProvider", "href": f"{self._cluster_href(c)}/identity_providers/{body['id']}", **shown}

    def _syncset_json(self, c: _Cluster, s: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "Syncset", "href": f"{self._cluster_href(c)}/external_configuration/syncsets/{s['id']}", **s}

    @staticmethod
    def _list(kind: str, items: list[dict[str, Any]], query: dict[str, list[str]]) -> dict[str, Any]:
        page = int((query.get("page") or ["1"])[0])
        size = int((query.get("size") or ["100"])[0])
        chunk = items[(page - 1) * size : page * size]
        return {"kind": kind, "page": page, "size": len(chunk), "total": len(items), "items": chunk}

    # ------------------------------------------------------------------ HTTP

    def _route(self, method: str, sub: str) -> str:
        parts = sub.strip("/").split("/")
        if len(parts) >= 2 and parts[0] == "clusters":
            parts[1] = "{id}"
        if len(parts) >= 4 and parts[2] in ("machine_pools", "addons", "ingresses", "identity_providers"):
            parts[3] = "{sub}"
        if len(parts) >= 5 and parts[3] == "syncsets":
            parts[4] = "{sub}"
        return f"{method} /" + "/".join(parts)

    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, Any] | None, dict[str, str], float]:
        """(status, JSON body or None for no content, extra headers, delay before answering);
        raises Drop to close the connection unanswered."""
        parsed = urlparse(raw_path)
        path, query = parsed.path, parse_qs(parsed.query)
        if path.startswith("/sim/v1/"):
            status, payload = self._control(method, path[len("/sim/v1") :], body)
            return status, payload, {}, 0.0
        if not path.startswith(API + "/"):
            return 404, ocm_error(404, f"Resource '{path}' doesn't exist"), {}, 0.0
        sub = path[len(API) :]
        with self._lock:
            now = self.now()
            self.requests += 1
            route = self._route(method, sub)
            self.requests_by_route[route] = self.requests_by_route.get(route, 0) + 1
            op = f"op-{self.requests}"
            delay = 0.0
            try:
                if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
                    raise OcmError(401, "Request is unauthorized: invalid or missing bearer token")
                delay = self._apply_faults(method, sub)
                self._collect(now)
                status, payload = self._dispatch(method, sub, query, body, now)
                if method == "POST" and sub.rstrip("/") == "/clusters" and status == 201 and self._lose_creates > 0:
                    self._lose_creates -= 1
                    self.lost_responses += 1
                    if self._lose_status is None:
                        raise Drop()
                    raise OcmError(self._lose_status, "The server is currently unable to handle the request")
                return status, payload, {"X-Operation-ID": op}, delay
            except OcmError as err:
                extra = {"X-Operation-ID": op}
                if err.status == 429:
                    extra["Retry-After"] = str(err.retry_after_s or 1)
                return err.status, ocm_error(err.status, err.reason, op), extra, delay

    def _apply_faults(self, method: str, sub: str) -> float:
        """Raise the first matching error fault; return the delay of matching slow ones."""
        delay = 0.0
        for fault in self._faults:
            if not fault.matches(method, sub):
                continue
            fault.count -= 1
            delay = max(delay, fault.delay_s)
            if fault.status:
                self._faults = [f for f in self._faults if f.count > 0]
                raise OcmError(fault.status, fault.reason, fault.retry_after_s)
        self._faults = [f for f in self._faults if f.count > 0]
        return delay

    @staticmethod
    def _json(body: bytes) -> dict[str, Any]:
        try:
            data = parse_json(body, {})
        except ValueError as err:
            raise OcmError(400, f"Request body is not valid JSON: {err}") from None
        if not isinstance(data, dict):
            raise OcmError(400, "Request body must be a JSON object")
        return data

    def _cluster(self, cid: str) -> _Cluster:
        c = self._clusters.get(cid)
        if c is None:
            raise OcmError(404, f"Cluster '{cid}' not found")
        return c

    def _dispatch(
        self, method: str, sub: str, query: dict[str, list[str]], body: bytes, now: float
    ) -> tuple[int, dict[str, Any] | None]:
        parts = [p for p in sub.split("/") if p]
        if parts == ["clusters"]:
            if method == "POST":
                return 201, self._cluster_json(self._create_cluster(self._json(body), now), now)
            if method == "GET":
                return 200, self._list_clusters(query, now)
        if len(parts) < 2 or parts[0] != "clusters":
            raise OcmError(404, f"Resource '{API}{sub}' doesn't exist")
        c = self._cluster(parts[1])
        rest = parts[2:]
        if not rest:
            if method == "GET":
                return 200, self._cluster_json(c, now)
            if method == "DELETE":
                if c.delete_at is None:
                    c.delete_at = now
                    self.delete_requests += 1
                return 204, None
            if method == "PATCH":
                raise OcmError(400, "Cluster updates are not supported by the simulator")
        elif rest == ["status"] and method == "GET":
            return 200, self._status_json(c, self._state(c, now))
        elif rest[0] == "machine_pools":
            return self._machine_pools(c, method, rest[1:], body, query, now)
        elif rest[0] == "addons":
            return self._addons(c, method, rest[1:], body, query, now)
        elif rest[0] == "ingresses" and method == "GET":
            items = self._ingresses_json(c, now)
            if len(rest) == 1:
                return 200, self._list("IngressList", items, query)
            found = [i for i in items if i["id"] == rest[1]]
            if not found:
                raise OcmError(404, f"Ingress '{rest[1]}' not found")
            return 200, found[0]
        elif rest[0] == "identity_providers":
            return self._identity_providers(c, method, rest[1:], body, query)
        elif rest[:2] == ["external_configuration", "syncsets"]:
            return self._syncsets(c, method, rest[2:], body, query)
        raise OcmError(404, f"Resource '{API}{sub}' doesn't exist for method {method}")

    # -- clusters --------------------------------------------------------------------

    def _create_cluster(self, data: dict[str, Any], now: float) -> _Cluster:
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise OcmError(400, "Attribute 'name' is required")
        if len(name) > self.max_name_length or not _DNS_LABEL.match(name):
            raise OcmError(
                400,
                f"Cluster name '{name}' is not valid: attribute 'name' must be a lowercase DNS label "
                f"of at most {self.max_name_length} characters",
            )
        provider = (data.get("cloud_provider") or {}).get("id")
        if provider not in self.cloud_providers:
            raise OcmError(400, f"Attribute 'cloud_provider.id' must be one of {list(self.cloud_providers)}, got {provider!r}")  # fmt: skip
        if not (data.get("region") or {}).get("id"):
            raise OcmError(400, "Attribute 'region.id' is required")
        multi_az = data.get("multi_az", False)
        if not isinstance(multi_az, bool):
            raise OcmError(400, "Attribute 'multi_az' must be a boolean")
        auto = (data.get("nodes") or {}).get("autoscale_compute")
        if auto is not None:
            self._check_counts(auto, "nodes.autoscale_compute", multi_az)
        if any(c.name == name for c in self._clusters.values()):
            raise OcmError(400, f"Cluster name '{name}' already exists")
        self._seq += 1
        cid = hashlib.sha1(f"ocm-cluster-{self._seq}".encode()).hexdigest()[:32]
        cluster = _Cluster(
            id=cid,
            name=name,
            external_id=str(data.get("external_id") or ""),
            body=data,
            created=now,
            error_message=self._error_clusters.pop(0) if self._error_clusters else "",
        )
        self._clusters[cid] = cluster
        self.clusters_created += 1
        return cluster

    def _list_clusters(self, query: dict[str, list[str]], now: float) -> dict[str, Any]:
        terms: list[tuple[str, str, str]] = []
        search = (query.get("search") or [""])[0].strip()
        if search:
            for raw in re.split(r"\s+and\s+", search, flags=re.IGNORECASE):
                m = _SEARCH_TERM.match(raw)
                if not m or m.group(1) not in _SEARCHABLE:
                    raise OcmError(400, f"Can't parse search query '{search}': unsupported term '{raw.strip()}'")
                terms.append((m.group(1), m.group(2), m.group(3)))
        items = []
        for c in self._clusters.values():
            j = self._cluster_json(c, now)
            if all(_term_holds(j, *t) for t in terms):
                items.append(j)
        return self._list("ClusterList", items, query)

    @staticmethod
    def _check_counts(spec: dict[str, Any], where: str, multi_az: bool) -> None:
        lo, hi = spec.get("min_replicas"), spec.get("max_replicas")
        if not isinstance(lo, int) or not isinstance(hi, int) or lo < 0 or hi < 1:
            raise OcmError(400, f"Attributes '{where}.min_replicas' and '{where}.max_replicas' must be integers (min >= 0, max >= 1)")  # fmt: skip
        if lo > hi:
            raise OcmError(
                400, f"Attribute '{where}.min_replicas' ({lo}) must not exceed '{where}.max_replicas' ({hi})"
            )
        if multi_az:
            for key, value in (("min_replicas", lo), ("max_replicas", hi)):
                if value % 3:
                    raise OcmError(400, f"Attribute '{where}.{key}' must be a multiple of 3 for a multi-AZ cluster, got {value}")  # fmt: skip

    # -- machine pools ---------------------------------------------------------------

    def _machine_pools(
        self, c: _Cluster, method: str, rest: list[str], body: bytes, query: dict[str, list[str]], now: float
    ) -> tuple[int, dict[str, Any] | None]:
        multi_az = bool(c.body.get("multi_az", False))
        if not rest and method == "GET":
            return 200, self._list("MachinePoolList", [self._pool_json(c, p) for p in c.pools.values()], query)
        if not rest and method == "POST":
            data = self._json(body)
            pid = data.get("id")
            if not isinstance(pid, str) or not _POOL_ID.match(pid) or len(pid) > 30:
                raise OcmError(400, "Attribute 'id' is required: a lowercase DNS label of at most 30 characters")
            if self._state(c, now) != "ready":
                raise OcmError(400, f"Cluster '{c.id}' is not ready: machine pools can be added once it is installed")
            if pid in c.pools:
                raise OcmError(409, f"Machine pool with id '{pid}' already exists")
            pool = self._pool_body(pid, data, multi_az)
            c.pools[pid] = pool
            return 201, self._pool_json(c, pool)
        if len(rest) != 1:
            raise OcmError(404, "Resource doesn't exist")
        pool = c.pools.get(rest[0])
        if pool is None:
            raise OcmError(404, f"Machine pool '{rest[0]}' not found")
        if method == "GET":
            return 200, self._pool_json(c, pool)
        if method == "DELETE":
            del c.pools[rest[0]]
            return 204, None
        if method == "PATCH":
            change = self._json(body)
            merged = {**pool, **change}
            if "replicas" in change:  # switching between fixed and autoscaled
                merged.pop("autoscaling", None)
            elif "autoscaling" in change:
                merged.pop("replicas", None)
            c.pools[rest[0]] = self._pool_body(rest[0], merged, multi_az)
            return 200, self._pool_json(c, c.pools[rest[0]])
        raise OcmError(404, "Resource doesn't exist")

    def _pool_body(self, pid: str, data: dict[str, Any], multi_az: bool) -> dict[str, Any]:
        auto, replicas = data.get("autoscaling"), data.get("replicas")
        if (auto is None) == (replicas is None):
            raise OcmError(400, "Exactly one of attributes 'replicas' and 'autoscaling' must be set")
        if auto is not None:
            self._check_counts(auto, "autoscaling", multi_az)
        elif not isinstance(replicas, int) or replicas < 0 or (multi_az and replicas % 3):
            raise OcmError(400, f"Attribute 'replicas' must be a non-negative integer{' and a multiple of 3 for a multi-AZ cluster' if multi_az else ''}")  # fmt: skip
        labels = data.get("labels") or {}
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise OcmError(400, "Attribute 'labels' must map strings to strings")
        taints = data.get("taints") or []
        for i, t in enumerate(taints):
            if not isinstance(t, dict) or not t.get("key") or t.get("effect") not in _TAINT_EFFECTS:
                raise OcmError(400, f"Attribute 'taints[{i}]' needs a key and an effect in {list(_TAINT_EFFECTS)}")
        zones = data.get("availability_zones") or []
        if not isinstance(zones, list) or (zones and len(zones) not in (1, 3)):
            raise OcmError(400, "Attribute 'availability_zones' must list 1 or 3 zones")
        out: dict[str, Any] = {
            "id": pid,
            "instance_type": (data.get("instance_type") or "m5.xlarge"),
            "labels": labels,
            "taints": taints,
            "availability_zones": zones,
        }
        if auto is not None:
            out["autoscaling"] = {"min_replicas": auto["min_replicas"], "max_replicas": auto["max_replicas"]}
        else:
            out["replicas"] = replicas
        return out

    # -- addons ----------------------------------------------------------------------

    def _addons(
        self, c: _Cluster, method: str, rest: list[str], body: bytes, query: dict[str, list[str]], now: float
    ) -> tuple[int, dict[str, Any] | None]:
        if not rest and method == "GET":
            return 200, self._list("AddOnInstallationList", [self._addon_json(c, a, now) for a in c.addons.values()], query)  # fmt: skip
        if not rest and method == "POST":
            data = self._json(body)
            aid = (data.get("addon") or {}).get("id")
            if not isinstance(aid, str) or not aid:
                raise OcmError(400, "Attribute 'addon.id' is required")
            if c.delete_at is not None:
                raise OcmError(400, f"Cluster '{c.id}' is being uninstalled")
            if aid in c.addons:
                raise OcmError(409, f"Add-on '{aid}' is already installed on cluster '{c.id}'")
            items = ((data.get("parameters") or {}).get("items")) or []
            if not all(isinstance(p, dict) and isinstance(p.get("id"), str) and isinstance(p.get("value"), str) for p in items):  # fmt: skip
                raise OcmError(400, "Attribute 'parameters.items' must list {id, value} strings")
            addon = _Addon(aid, [{"id": p["id"], "value": p["value"]} for p in items], now, aid in self._failing_addons)
            c.addons[aid] = addon
            return 201, self._addon_json(c, addon, now)
        if len(rest) != 1:
            raise OcmError(404, "Resource doesn't exist")
        addon = c.addons.get(rest[0])
        if addon is None:
            raise OcmError(404, f"Add-on installation '{rest[0]}' not found")
        if method == "GET":
            return 200, self._addon_json(c, addon, now)
        if method == "DELETE":
            del c.addons[rest[0]]
            return 204, None
        raise OcmError(404, "Resource doesn't exist")

    # -- identity providers -----------------------------------------------------------

    def _identity_providers(
        self, c: _Cluster, method: str, rest: list[str], body: bytes, query: dict[str, list[str]]
    ) -> tuple[int, dict[str, Any] | None]:
        if not rest and method == "GET":
            return 200, self._list("IdentityProviderList", [self._idp_json(c, b) for b in c.idps.values()], query)
        if not rest and method == "POST":
            data = self._json(body)
            name = data.get("name")
            if not isinstance(name, str) or not name:
                raise OcmError(400, "Attribute 'name' is required")
            if data.get("type") not in _IDP_TYPES:
                raise OcmError(400, f"Attribute 'type' must be one of {list(_IDP_TYPES)}")
            if data["type"] == "OpenIDIdentityProvider":
                oid = data.get("open_id") or {}
                for key in ("client_id", "client_secret", "issuer"):
                    if not oid.get(key):
                        raise OcmError(400, f"Attribute 'open_id.{key}' is required")
            if any(b["name"] == name for b in c.idps.values()):
                raise OcmError(400, f"Identity provider with name '{name}' already exists")
            self._seq += 1
            stored = {**data, "id": hashlib.sha1(f"idp-{self._seq}".encode()).hexdigest()[:32]}
            c.idps[stored["id"]] = stored
            return 201, self._idp_json(c, stored)
        if len(rest) == 1 and rest[0] in c.idps:
            if method == "GET":
                return 200, self._idp_json(c, c.idps[rest[0]])
            if method == "DELETE":
                del c.idps[rest[0]]
                return 204, None
        raise OcmError(404, f"Identity provider '{'/'.join(rest)}' not found")

    # -- syncsets (cluster resources) --------------------------------------------------

    def _syncsets(
        self, c: _Cluster, method: str, rest: list[str], body: bytes, query: dict[str, list[str]]
    ) -> tuple[int, dict[str, Any] | None]:
        if not rest and method == "GET":
            return 200, self._list("SyncsetList", [self._syncset_json(c, s) for s in c.syncsets.values()], query)
        if not rest and method == "POST":
            data = self._json(body)
            sid = data.get("id")
            if not isinstance(sid, str) or not _POOL_ID.match(sid):
                raise OcmError(400, "Attribute 'id' is required: a lowercase DNS label")
            if sid in c.syncsets:
                raise OcmError(409, f"Syncset with id '{sid}' already exists")
            c.syncsets[sid] = {"id": sid, "resources": self._resources(data)}
            return 201, self._syncset_json(c, c.syncsets[sid])
        if len(rest) == 1 and rest[0] in c.syncsets:
            if method == "GET":
                return 200, self._syncset_json(c, c.syncsets[rest[0]])
            if method == "PATCH":
                c.syncsets[rest[0]]["resources"] = self._resources(self._json(body))
                return 200, self._syncset_json(c, c.syncsets[rest[0]])
            if method == "DELETE":
                del c.syncsets[rest[0]]
                return 204, None
        raise OcmError(404, f"Syncset '{'/'.join(rest)}' not found")

    @staticmethod
    def _resources(data: dict[str, Any]) -> list[dict[str, Any]]:
        resources = data.get("resources")
        if not isinstance(resources, list):
            raise OcmError(400, "Attribute 'resources' must be a list of Kubernetes objects")
        for i, r in enumerate(resources):
            if not isinstance(r, dict) or not r.get("apiVersion") or not r.get("kind"):
                raise OcmError(400, f"Attribute 'resources[{i}]' needs apiVersion and kind")
        return resources

    # ------------------------------------------------------------------ control API

    def _control(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        try:
            data = parse_json(body, {})
        except ValueError:
            return 400, {"error": "invalid JSON"}
        if method == "GET" and path == "/stats":
            return 200, self.stats()
        if method == "GET" and path == "/clusters":
            return 200, {"clusters": self.clusters()}
        if method == "GET" and path == "/addons":
            return 200, {"addons": self.addon_installations()}
        if method == "POST" and path == "/faults":
            self.inject_fault(
                int(data["status"]),
                int(data.get("count", 1)),
                method=data.get("method"),
                path=data.get("path"),
                reason=data.get("reason"),
                delay_s=float(data.get("delay_s", 0.0)),
                retry_after_s=data.get("retry_after_s"),
            )
            return 200, {}
        if method == "POST" and path == "/slow":
            self.slow_responses(float(data["delay_s"]), int(data.get("count", 1)), method=data.get("method"), path=data.get("path"))  # fmt: skip
            return 200, {}
        if method == "POST" and path == "/lose_create_responses":
            self.lose_create_responses(int(data.get("count", 1)), data.get("status"))
            return 200, {}
        if method == "POST" and path == "/clusters_end_in_error":
            self.clusters_end_in_error(int(data.get("count", 1)), data.get("message") or "Failed to provision cluster")
            return 200, {}
        if method == "POST" and path == "/fail_addon":
            self.fail_addon(data["addon_id"], bool(data.get("fails", True)))
            return 200, {}
        if method == "POST" and path == "/timings":
            with self._lock:
                for key, value in data.items():
                    if not hasattr(self.timings, key):
                        return 400, {"error": f"unknown timing {key}"}
                    setattr(self.timings, key, float(value))
            return 200, {}
        if method == "POST" and path == "/advance":
            self.advance(float(data.get("seconds", 0.0)))
            return 200, {}
        if method == "POST" and path == "/reset_faults":
            self.reset_faults()
            return 200, {}
        return 404, {"error": f"no control endpoint {method} {path}"}


def _term_holds(cluster: dict[str, Any], key: str, op: str, value: str) -> bool:
    got: Any = cluster
    for part in key.split("."):
        got = got.get(part) if isinstance(got, dict) else None
    got = "" if got is None else str(got)
    if op == "=":
        return got == value
    pattern = "^" + re.escape(value).replace("%", ".*") + "$"  # SQL LIKE: % is any run
    return re.match(pattern, got) is not None


def main() -> int:
    parser = argparse.ArgumentParser(description="Fake OCM clusters_mgmt API on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8091)
    parser.add_argument("--token", default="sim-ocm-token")
    parser.add_argument("--pending", type=float, default=1.0, help="seconds a new cluster stays pending")
    parser.add_argument("--installing", type=float, default=2.0, help="seconds it then installs")
    parser.add_argument("--uninstalling", type=float, default=2.0)
    parser.add_argument("--addon-install", type=float, default=1.0)
    args = parser.parse_args()
    timings = Timings(args.pending, args.installing, args.uninstalling, args.addon_install)
    sim = FakeOcm(args.token, port=args.port, timings=timings)
    # Never the token: logs are scanned for secrets (tests/e2e/leaks.py).
    return serve_until_interrupted(sim, lambda s: f"fake OCM API at {s.url}{API} (control at {s.url}/sim/v1)")


if __name__ == "__main__":
    sys.exit(main())
