"""A fake Hetzner Cloud API on 127.0.0.1, served well enough for the official `hcloud` client.

It stands for the outside world, so it never imports growth's packages. What it plays:

- the REST shapes hcloud parses: servers (list with label_selector/name/pagination, create,
  get, delete), server types (per-location prices and deprecation), locations, actions;
- bearer-token auth (401 `unauthorized`); tokens belong to projects, and each project has one
  request budget shared by all its tokens, as Hetzner documents it: a bucket of 3,600 requests
  that refills by one a second (limit/3600 per second), RateLimit-Limit/-Remaining/-Reset
  (the Unix time the bucket is full again) on every answer, 429 `rate_limit_exceeded` when empty.
  `rate_time_scale` runs the refill clock faster (benchmarks only; the ratios stay the same);
- images (system images per architecture, snapshots with labels), spread placement groups
  (at most 10 servers each, as Hetzner allows), networks (cloud subnets) and firewalls, each
  listed with Hetzner's `name` and `label_selector` filters (how clients look a name up);
- servers' public_net (enable_ipv4/ipv6 false: no such address), networks and firewalls that
  must exist, and the actions a server created off needs: attach_to_network (with an
  ip_range that must be one of the network's subnets) and poweron;
- capacity per (server type, location) and a project server limit, answered with Hetzner's
  error codes: `resource_unavailable` (HTTP 403 in Hetzner's table), `placement_error` (412),
  `resource_limit_exceeded` (403), `rate_limit_exceeded` (429), `uniqueness_error` (409);
- fault injection (rate-limit storms, 5xx, slow actions, removed/deprecated server types, a
  create whose response is lost) through Python methods or the control API under /sim/v1/;
- booting: a started server boots after `boot_delay_s`, and the machine (its hardware, user
  data and the cloud's metadata) is handed to a `sim.kube.kubelet.Kubelet`, which plays
  cloud-init + kubeadm join + kubelet (and the cloud controller manager's Node clean-up when
  the server is deleted). This module is only the cloud API; without a kubelet a server just
  runs.

Run alone: `python -m sim.clouds.hetzner --port 8090 --token sim-token`.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlparse

from sim.http import JSON, Drop, Server, answering_handler, parse_json, serve_until_interrupted
from sim.kube.kubelet import Kubelet, Machine
from sim.kube.kubelet import parse_kubelet_user_data as parse_kubelet_user_data  # re-exported for tests

GIB = 1024**3
VAT = 1.19

# name: (id, cores, memory GB, disk GB, architecture, cpu_type, net EUR/hour)
DEFAULT_SERVER_TYPES: dict[str, tuple[int, int, float, int, str, str, float]] = {
    "cx22": (104, 2, 4.0, 40, "x86", "shared", 0.0060),
    "cx31": (5, 2, 8.0, 80, "x86", "shared", 0.0143),
    "cx32": (105, 4, 8.0, 80, "x86", "shared", 0.0104),
    "cx33": (114, 4, 8.0, 80, "x86", "shared", 0.0088),
    "cx42": (106, 8, 16.0, 160, "x86", "shared", 0.0259),
    "cax11": (45, 2, 4.0, 40, "arm", "shared", 0.0064),
    "cax21": (93, 4, 8.0, 80, "arm", "shared", 0.0104),
}

# name: (id, city, country, network zone, latitude, longitude)
DEFAULT_LOCATIONS: dict[str, tuple[int, str, str, str, float, float]] = {
    "fsn1": (1, "Falkenstein", "DE", "eu-central", 50.47612, 12.370071),
    "nbg1": (2, "Nuremberg", "DE", "eu-central", 49.452102, 11.076665),
    "hel1": (3, "Helsinki", "FI", "eu-central", 60.169855, 24.938379),
    "ash": (4, "Ashburn, VA", "US", "us-east", 39.045753, -77.487442),
}

_HOSTNAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")

_HTTP_STATUS = {
    "unauthorized": 401,
    "forbidden": 403,
    "invalid_input": 400,
    "json_error": 400,
    "not_found": 404,
    "locked": 423,
    "rate_limit_exceeded": 429,
    "resource_limit_exceeded": 403,
    "resource_unavailable": 403,
    "placement_error": 412,
    "uniqueness_error": 409,
    "conflict": 409,
    "server_error": 500,
    "bad_gateway": 502,
    "service_error": 503,
    "unavailable": 503,
    "maintenance": 503,
    "timeout": 504,
}


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


class ApiError(Exception):
    def __init__(self, code: str, message: str, status: int | None = None, details: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status if status is not None else _HTTP_STATUS.get(code, 400)
        self.details = details


@dataclass
class Fault:
    """An injected failure for the next `count` matching API requests."""

    code: str
    count: int
    status: int | None = None
    method: str | None = None  # None matches every method
    path: str | None = None  # prefix of the path after /v1, e.g. "/servers"
    message: str = "injected fault"


@dataclass
class LoseResponses:
    count: int = 0
    # "drop": close the socket; "delay": answer after delay_s; "error": answer with the error
    # `code` (a proxy's 502, a backend's 500) though the server was created
    mode: str = "drop"
    delay_s: float = 5.0
    code: str = "server_error"


@dataclass
class _Bucket:
    """One project's request budget (Hetzner counts per project, not per token)."""

    limit: int
    remaining: float
    updated: float
    requests: int = 0
    limited: int = 0  # 429 answers


@dataclass
class _Image:
    id: int
    name: str | None
    type: str  # system | snapshot
    architecture: str  # x86 | arm
    created: float
    labels: dict[str, str] = field(default_factory=dict)
    description: str = ""


@dataclass
class _PlacementGroup:
    id: int
    name: str
    type: str
    labels: dict[str, str]
    created: float


@dataclass
class _Network:
    id: int
    name: str
    ip_range: str
    subnets: list[str]  # cloud subnets' ip ranges, inside ip_range
    labels: dict[str, str]
    created: float


@dataclass
class _Firewall:
    id: int
    name: str
    labels: dict[str, str]
    created: float


SPREAD_GROUP_MAX = 10  # servers in one spread placement group (Hetzner's documented limit)
DEFAULT_PROJECT = "default"
# System images the fake offers, one per architecture like Hetzner's (same name, two ids).
SYSTEM_IMAGES = ("ubuntu-22.04", "ubuntu-24.04", "debian-12")


@dataclass
class _Server:
    id: int
    name: str
    server_type: str
    location: str
    image: str
    labels: dict[str, str]
    user_data: str
    created: float
    start: bool
    running_at: float
    boot_at: float
    networks: list[int] = field(default_factory=list)
    firewalls: list[int] = field(default_factory=list)
    placement_group: int | None = None
    image_id: int = 0
    public_ipv4: bool = True  # public_net.enable_ipv4 at create
    public_ipv6: bool = True
    subnet_of: dict[int, str] = field(default_factory=dict)  # network id -> subnet ip_range attached in
    node_registered: bool = False
    join_refused: bool = False
    register_attempts: int = 0


@dataclass
class _Action:
    id: int
    command: str
    resources: list[dict[str, Any]]
    started: float
    finish_at: float
    error: dict[str, str] | None = None

    def json(self, now: float) -> dict[str, Any]:
        done = now >= self.finish_at
        status = ("error" if self.error else "success") if done else "running"
        return {
            "id": self.id,
            "command": self.command,
            "status": status,
            "progress": 100 if done else 0,
            "started": _iso(self.started),
            "finished": _iso(self.finish_at) if done else None,
            "resources": self.resources,
            "error": self.error if done else None,
        }


def _json_body(body: bytes) -> Any:
    """A request's JSON (an empty body reads as {}), or Hetzner's json_error."""
    try:
        return parse_json(body, {})
    except ValueError as exc:
        raise ApiError("json_error", "invalid JSON") from exc


def _named(data: dict[str, Any]) -> str:
    """The `name` a create requires, or Hetzner's invalid_input naming the field."""
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ApiError("invalid_input", "invalid input in field 'name'")
    return name


def parse_label_selector(selector: str) -> list[tuple[str, str, list[str]]]:
    """Hetzner label selector → [(op, key, values)] with op in =, !=, exists, !exists, in, notin."""
    terms: list[str] = []
    depth, cur = 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    out: list[tuple[str, str, list[str]]] = []
    for raw in terms:
        term = raw.strip()
        if not term:
            continue
        m = re.match(r"^(\S+)\s+(in|notin)\s+\((.*)\)$", term)
        if m:
            values = [v.strip() for v in m.group(3).split(",") if v.strip()]
            out.append((m.group(2), m.group(1), values))
        elif "!=" in term:
            k, v = term.split("!=", 1)
            out.append(("!=", k.strip(), [v.strip()]))
        elif "==" in term:
            k, v = term.split("==", 1)
            out.append(("=", k.strip(), [v.strip()]))
        elif "=" in term:
            k, v = term.split("=", 1)
            out.append(("=", k.strip(), [v.strip()]))
        elif term.startswith("!"):
            out.append(("!exists", term[1:].strip(), []))
        else:
            out.append(("exists", term, []))
    return out


def selector_matches(terms: list[tuple[str, str, list[str]]], labels: dict[str, str]) -> bool:
    for op, key, values in terms:
        present = key in labels
        value = labels.get(key)
        if op == "=":
            ok = present and value == values[0]
        elif op == "!=":
            ok = not present or value != values[0]
        elif op == "exists":
            ok = present
        elif op == "!exists":
            ok = not present
        elif op == "in":
            ok = present and value in values
        else:  # notin
            ok = not present or value not in values
        if not ok:
            return False
    return True


class FakeHetzner:
    """The fake API. Start with start() or `with FakeHetzner(...) as hz:`; hz.url is the
    endpoint to give hcloud.Client(api_endpoint=...)."""

    def __init__(
        self,
        token: str = "sim-token",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        server_types: dict[str, tuple[int, int, float, int, str, str, float]] | None = None,
        locations: dict[str, tuple[int, str, str, str, float, float]] | None = None,
        capacity: dict[tuple[str, str], int] | None = None,
        server_limit: int | None = None,
        rate_limit_per_hour: int = 3600,
        rate_time_scale: float = 1.0,
        project: str = DEFAULT_PROJECT,
        action_delay_s: float = 0.0,
        boot_delay_s: float = 1.0,
        kube_url: str | None = None,
        kube_token: str | None = None,
        join_token: str | None = None,
        kube_reserved_cpu_m: int = 100,
        kube_reserved_memory: int = 256 * 1024**2,
        max_pods: int = 110,
        kubelet: Kubelet | None = None,
    ) -> None:
        self.token = token
        self._host = host
        self._port = port
        self._lock = threading.RLock()
        self._types_spec = dict(server_types or DEFAULT_SERVER_TYPES)
        self._locations_spec = dict(locations or DEFAULT_LOCATIONS)
        self._removed_types: set[str] = set()
        # name → {"announced", "unavailable_after", "locations": set|None}
        self._deprecations: dict[str, dict[str, Any]] = {}
        self._capacity: dict[tuple[str, str], int] = dict(capacity or {})
        self.server_limit = server_limit
        self.rate_limit_per_hour = rate_limit_per_hour
        self.rate_time_scale = rate_time_scale
        self._tokens: dict[str, str] = {token: project}  # token → project
        self._buckets: dict[str, _Bucket] = {}
        self._images: dict[int, _Image] = {}
        for i, name in enumerate(SYSTEM_IMAGES):
            for j, arch in enumerate(("x86", "arm")):
                image_id = 100_000 + 10 * i + j
                self._images[image_id] = _Image(image_id, name, "system", arch, time.time() - 86400 * 30)
        self._next_image_id = 200_000
        self._placement_groups: dict[int, _PlacementGroup] = {}
        self._next_placement_group_id = 1
        self._networks: dict[int, _Network] = {}
        self._firewalls: dict[int, _Firewall] = {}
        self._next_resource_id = 7000  # networks and firewalls
        self._storm: tuple[int, float] = (0, 0.0)  # (requests left, reset at)
        self._faults: list[Fault] = []
        self._lose = LoseResponses()
        self.action_delay_s = action_delay_s
        self.boot_delay_s = boot_delay_s
        # kube_url & co. are a shorthand for the kubelet that boots this cloud's servers.
        if kubelet is None and kube_url:
            kubelet = Kubelet(
                kube_url,
                kube_token,
                join_token=join_token,
                reserved_cpu_m=kube_reserved_cpu_m,
                reserved_memory=kube_reserved_memory,
                max_pods=max_pods,
            )
        self.kubelet = kubelet
        self._servers: dict[int, _Server] = {}
        self._actions: dict[int, _Action] = {}
        self._next_server_id = 1000
        self._next_action_id = 1
        self._node_deletes: list[str] = []
        self.requests = 0
        self.requests_by_route: dict[str, int] = {}
        self.created_total = 0
        self.join_refused: list[str] = []
        self._httpd: Server | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        """API endpoint including /v1, as hcloud expects."""
        return f"{self.base_url}/v1"

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeHetzner not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHetzner:
        handler = answering_handler(self, ("GET", "POST", "PUT", "DELETE"), None, JSON)
        self._httpd = Server((self._host, self._port), handler)
        self._stop.clear()
        serve = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-hetzner", daemon=True
        )
        boot = threading.Thread(target=self._boot_loop, name="fake-hetzner-boot", daemon=True)
        self._threads = [serve, boot]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        for t in self._threads:
            t.join(timeout=5)
        self._threads = []

    def __enter__(self) -> FakeHetzner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ fault injection

    def set_capacity(self, server_type: str, location: str, count: int | None) -> None:
        """Machines of this type the location can still create (None = unlimited)."""
        with self._lock:
            key = (server_type.lower(), location)
            if count is None:
                self._capacity.pop(key, None)
            else:
                self._capacity[key] = count

    def set_server_limit(self, limit: int | None) -> None:
        with self._lock:
            self.server_limit = limit

    def inject_fault(
        self,
        code: str,
        count: int = 1,
        *,
        status: int | None = None,
        method: str | None = None,
        path: str | None = None,
        message: str = "injected fault",
    ) -> None:
        """Answer the next `count` matching requests with this error code (e.g. server_error,
        bad_gateway, resource_unavailable, placement_error, resource_limit_exceeded)."""
        with self._lock:
            self._faults.append(Fault(code, count, status, method, path, message))

    def rate_limit_storm(self, count: int, reset_in_s: float = 30.0) -> None:
        """The next `count` requests get 429 rate_limit_exceeded with Remaining 0."""
        with self._lock:
            self._storm = (count, time.time() + reset_in_s)

    def lose_create_responses(
        self, count: int = 1, mode: str = "drop", delay_s: float = 5.0, code: str = "server_error"
    ) -> None:
        """The next `count` creates succeed server-side but the answer is lost: `drop` closes
        the connection, `delay` answers after delay_s (past the client's timeout, or before it
        to hold a create in progress), `error` answers with the error `code` (its HTTP status
        from Hetzner's table) instead of the created server."""
        if mode not in ("drop", "delay", "error"):
            raise ValueError("mode must be 'drop', 'delay' or 'error'")
        if mode == "error" and _HTTP_STATUS.get(code, 0) < 500:
            raise ValueError(f"code must be one of Hetzner's 5xx codes, not {code!r}")
        with self._lock:
            self._lose = LoseResponses(count, mode, delay_s, code)

    def remove_server_type(self, name: str) -> None:
        with self._lock:
            self._removed_types.add(name.lower())

    def deprecate_server_type(
        self,
        name: str,
        unavailable_after: str | None = None,
        locations: list[str] | None = None,
    ) -> None:
        """Mark a type deprecated (everywhere, or only in `locations`). Creating it fails once
        unavailable_after (ISO time; default: now) has passed."""
        with self._lock:
            self._deprecations[name.lower()] = {
                "announced": _iso(time.time()),
                "unavailable_after": unavailable_after or _iso(time.time()),
                "locations": set(locations) if locations else None,
            }

    def reset_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._storm = (0, 0.0)
            self._lose = LoseResponses()
            self._buckets.clear()

    # ------------------------------------------------------------------ projects, images

    def add_token(self, token: str, project: str = DEFAULT_PROJECT) -> None:
        """Another API token; tokens of one project share its request budget."""
        with self._lock:
            self._tokens[token] = project

    def set_rate_remaining(self, remaining: float, project: str = DEFAULT_PROJECT) -> None:
        """Start a project's bucket part-spent (as if another tool had used it)."""
        with self._lock:
            bucket = self._bucket(project, time.time())
            bucket.remaining = max(0.0, min(float(bucket.limit), remaining))

    def add_snapshot(
        self, labels: dict[str, str], architecture: str = "x86", description: str = "", created: float | None = None
    ) -> int:
        """A snapshot image with labels (what a pool's label selector picks); returns its id."""
        if architecture not in ("x86", "arm"):
            raise ValueError("architecture must be x86 or arm")
        with self._lock:
            image_id = self._next_image_id
            self._next_image_id += 1
            self._images[image_id] = _Image(
                image_id,
                None,
                "snapshot",
                architecture,
                created if created is not None else time.time(),
                dict(labels),
                description or f"snapshot {image_id}",
            )
            return image_id

    def add_network(self, name: str, ip_range: str = "10.0.0.0/16", subnets: list[str] | None = None) -> int:
        """A private network with cloud subnets (by default one: its whole range); its id."""
        with self._lock:
            network = _Network(self._next_resource_id, name, ip_range, list(subnets or [ip_range]), {}, time.time())
            self._next_resource_id += 1
            self._networks[network.id] = network
            return network.id

    def add_firewall(self, name: str) -> int:
        with self._lock:
            firewall = _Firewall(self._next_resource_id, name, {}, time.time())
            self._next_resource_id += 1
            self._firewalls[firewall.id] = firewall
            return firewall.id

    def placement_groups(self) -> list[dict[str, Any]]:
        with self._lock:
            return [self._placement_group_json(g) for g in self._placement_groups.values()]

    # ------------------------------------------------------------------ inspection

    def servers(self) -> list[dict[str, Any]]:
        with self._lock:
            now = time.time()
            return [self._server_json(s, now) for s in self._servers.values()]

    def server_user_data(self, server_id: int) -> str:
        with self._lock:
            return self._servers[server_id].user_data

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self.requests,
                "requests_by_route": dict(self.requests_by_route),
                "servers": len(self._servers),
                "created_total": self.created_total,
                "nodes_registered": sum(1 for s in self._servers.values() if s.node_registered),
                "join_refused": list(self.join_refused),
                "lost_create_responses_left": self._lose.count,
                "rate_limit_remaining": int(self._bucket(DEFAULT_PROJECT, time.time()).remaining),
                "rate_limit_per_hour": self.rate_limit_per_hour,
                "projects": {
                    name: {"requests": b.requests, "responses_429": b.limited, "rate_limit_remaining": int(b.remaining)}
                    for name, b in self._buckets.items()
                },
            }

    # ------------------------------------------------------------------ catalogue

    def _type_available(self, name: str) -> bool:
        return name in self._types_spec and name not in self._removed_types

    def _deprecation_json(self, name: str, location: str | None) -> dict[str, str] | None:
        dep = self._deprecations.get(name)
        if dep is None:
            return None
        if location is not None and dep["locations"] is not None and location not in dep["locations"]:
            return None
        return {"announced": dep["announced"], "unavailable_after": dep["unavailable_after"]}

    def _server_type_json(self, name: str) -> dict[str, Any]:
        tid, cores, memory, disk, arch, cpu_type, net = self._types_spec[name]
        # Hetzner offers Arm (CAX) only in its EU locations.
        locs = [loc for loc, spec in self._locations_spec.items() if arch == "x86" or spec[3] == "eu-central"]
        dep_all = self._deprecations.get(name)
        type_level = None
        if dep_all is not None and dep_all["locations"] is None:
            type_level = self._deprecation_json(name, None)
        return {
            "id": tid,
            "name": name,
            "description": name.upper(),
            "category": "shared_vcpu" if cpu_type == "shared" else "dedicated_vcpu",
            "cores": cores,
            "memory": memory,
            "disk": disk,
            "storage_type": "local",
            "cpu_type": cpu_type,
            "architecture": arch,
            "deprecated": type_level is not None,
            "deprecation": type_level,
            "prices": [
                {
                    "location": loc,
                    "price_hourly": {"net": f"{net:.10f}", "gross": f"{net * VAT:.10f}"},
                    "price_monthly": {
                        "net": f"{net * 730:.10f}",
                        "gross": f"{net * 730 * VAT:.10f}",
                    },
                    "included_traffic": 20 * 1024**4,
                    "price_per_tb_traffic": {"net": "1.0000000000", "gross": "1.1900000000"},
                }
                for loc in locs
            ],
            "locations": [
                {
                    "id": self._locations_spec[loc][0],
                    "name": loc,
                    "deprecation": self._deprecation_json(name, loc),
                    "available": True,
                    "recommended": True,
                }
                for loc in locs
            ],
        }

    def _location_json(self, name: str) -> dict[str, Any]:
        lid, city, country, zone, lat, lon = self._locations_spec[name]
        return {
            "id": lid,
            "name": name,
            "description": f"{city} DC Park 1",
            "country": country,
            "city": city,
            "latitude": lat,
            "longitude": lon,
            "network_zone": zone,
        }

    def _server_json(self, s: _Server, now: float) -> dict[str, Any]:
        if now < s.running_at:
            status = "initializing"
        else:
            status = "running" if s.start else "off"
        octets = (s.id >> 8) & 255, s.id & 255
        return {
            "id": s.id,
            "name": s.name,
            "status": status,
            "created": _iso(s.created),
            "public_net": {
                # A server created with enable_ipv4/ipv6 false has no such address (null).
                "ipv4": {
                    "id": s.id + 500000,
                    "ip": f"203.0.{octets[0]}.{octets[1]}",
                    "blocked": False,
                    "dns_ptr": f"static.{s.id}.example",
                }
                if s.public_ipv4
                else None,
                "ipv6": {
                    "id": s.id + 600000,
                    "ip": f"2001:db8:{s.id:x}::/64",
                    "blocked": False,
                    "dns_ptr": [],
                }
                if s.public_ipv6
                else None,
                "floating_ips": [],
                "firewalls": [{"id": f, "status": "applied"} for f in s.firewalls],
            },
            "private_net": [
                {
                    "network": n,
                    "ip": self._private_ip(s, n),
                    "alias_ips": [],
                    "mac_address": f"86:00:00:00:{octets[0]:02x}:{octets[1]:02x}",
                }
                for n in s.networks
            ],
            "server_type": self._server_type_json(s.server_type)
            if s.server_type in self._types_spec
            else {"id": 0, "name": s.server_type},
            "datacenter": None,
            "location": self._location_json(s.location),
            "image": self._image_json(self._images[s.image_id]) if s.image_id in self._images else None,
            "iso": None,
            "rescue_enabled": False,
            "locked": False,
            "backup_window": None,
            "outgoing_traffic": 0,
            "ingoing_traffic": 0,
            "included_traffic": 20 * 1024**4,
            "protection": {"delete": False, "rebuild": False},
            "labels": dict(s.labels),
            "volumes": [],
            "load_balancers": [],
            "primary_disk_size": self._types_spec.get(s.server_type, (0, 0, 0, 0))[3],
            "placement_group": self._placement_group_json(self._placement_groups[s.placement_group])
            if s.placement_group in self._placement_groups
            else None,
        }

    def _private_ip(self, s: _Server, network_id: int) -> str:
        """An address in the subnet the server was attached in (the network's first subnet else)."""
        network = self._networks.get(network_id)
        subnet = s.subnet_of.get(network_id) or (network.subnets[0] if network else "10.0.0.0/16")
        net = ipaddress.ip_network(subnet)
        return str(net.network_address + 2 + s.id % max(1, net.num_addresses - 3))

    def _network_json(self, network: _Network) -> dict[str, Any]:
        return {
            "id": network.id,
            "name": network.name,
            "ip_range": network.ip_range,
            "subnets": [
                {
                    "type": "cloud",
                    "ip_range": r,
                    "network_zone": "eu-central",
                    "gateway": str(next(ipaddress.ip_network(r).hosts())),
                }
                for r in network.subnets
            ],
            "routes": [],
            "servers": [x.id for x in self._servers.values() if network.id in x.networks],
            "protection": {"delete": False},
            "labels": dict(network.labels),
            "created": _iso(network.created),
            "load_balancers": [],
            "expose_routes_to_vswitch": False,
        }

    def _firewall_json(self, firewall: _Firewall) -> dict[str, Any]:
        return {
            "id": firewall.id,
            "name": firewall.name,
            "labels": dict(firewall.labels),
            "created": _iso(firewall.created),
            "rules": [],
            "applied_to": [
                {"type": "server", "server": {"id": x.id}} for x in self._servers.values() if firewall.id in x.firewalls
            ],
        }

    def _named(self, items: list[Any], query: dict[str, list[str]]) -> list[Any]:
        """A list's `name` and `label_selector` filters, as Hetzner applies them."""
        if "name" in query:
            items = [i for i in items if i.name == query["name"][0]]
        if "label_selector" in query:
            terms = parse_label_selector(query["label_selector"][0])
            items = [i for i in items if selector_matches(terms, i.labels)]
        return items

    def _image_json(self, image: _Image) -> dict[str, Any]:
        name = image.name or ""
        return {
            "id": image.id,
            "type": image.type,
            "status": "available",
            "name": image.name,
            "description": image.description or name,
            "image_size": None if image.type == "system" else 1.2,
            "disk_size": 5,
            "created": _iso(image.created),
            "created_from": None,
            "bound_to": None,
            "os_flavor": name.split("-")[0] if name else "ubuntu",
            "os_version": name.split("-")[-1] if name else None,
            "rapid_deploy": image.type == "system",
            "protection": {"delete": False},
            "deprecated": None,
            "deleted": None,
            "labels": dict(image.labels),
            "architecture": image.architecture,
        }

    def _placement_group_json(self, group: _PlacementGroup) -> dict[str, Any]:
        return {
            "id": group.id,
            "name": group.name,
            "labels": dict(group.labels),
            "type": group.type,
            "servers": [x.id for x in self._servers.values() if x.placement_group == group.id],
            "created": _iso(group.created),
        }

    # ------------------------------------------------------------------ request handling

    def _new_action(self, command: str, server_id: int, delay: float, now: float) -> _Action:
        action = _Action(
            id=self._next_action_id,
            command=command,
            resources=[{"id": server_id, "type": "server"}],
            started=now,
            finish_at=now + delay,
        )
        self._next_action_id += 1
        self._actions[action.id] = action
        return action

    def _bucket(self, project: str, now: float) -> _Bucket:
        """The project's bucket, refilled up to now (limit/3600 a second, times the time scale)."""
        bucket = self._buckets.get(project)
        if bucket is None:
            bucket = self._buckets[project] = _Bucket(self.rate_limit_per_hour, float(self.rate_limit_per_hour), now)
        per_s = bucket.limit / 3600.0 * self.rate_time_scale
        bucket.remaining = min(float(bucket.limit), bucket.remaining + (now - bucket.updated) * per_s)
        bucket.updated = now
        return bucket

    def _rate_headers(self, bucket: _Bucket | None, now: float, limited_until: float | None = None) -> dict[str, str]:
        if bucket is None:  # unauthenticated: Hetzner still answers with the headers
            bucket = _Bucket(self.rate_limit_per_hour, float(self.rate_limit_per_hour), now)
        per_s = bucket.limit / 3600.0 * self.rate_time_scale
        reset = now + ((bucket.limit - bucket.remaining) / per_s if per_s > 0 else 0)
        remaining = int(bucket.remaining)
        if limited_until is not None:
            remaining, reset = 0, max(reset, limited_until)
        return {
            "RateLimit-Limit": str(bucket.limit),
            "RateLimit-Remaining": str(remaining),
            "RateLimit-Reset": str(int(math.ceil(reset))),
        }

    def _route(self, method: str, path: str) -> str:
        return f"{method} " + re.sub(r"/\d+", "/{id}", path)

    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, Any] | None, dict[str, str], float]:
        """(status, JSON body, extra headers, delay before answering); raises Drop."""
        parsed = urlparse(raw_path)
        path = parsed.path
        query = parse_qs(parsed.query)
        if path.startswith("/sim/v1/"):
            status, payload = self._control(method, path[len("/sim/v1") :], body)
            return status, payload, {}, 0.0
        if not path.startswith("/v1/"):
            return 404, {"error": {"code": "not_found", "message": "no such endpoint"}}, {}, 0.0
        sub = path[len("/v1") :]
        with self._lock:
            now = time.time()
            self.requests += 1
            route = self._route(method, sub)
            self.requests_by_route[route] = self.requests_by_route.get(route, 0) + 1
            limited_until: float | None = None
            bucket: _Bucket | None = None
            try:
                auth = headers.get("authorization", "")
                project = self._tokens.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
                if project is None:
                    raise ApiError("unauthorized", "unable to authenticate")
                bucket = self._bucket(project, now)
                bucket.requests += 1
                storm_left, storm_reset = self._storm
                if storm_left > 0:
                    self._storm = (storm_left - 1, storm_reset)
                    limited_until = storm_reset
                    bucket.limited += 1
                    raise ApiError("rate_limit_exceeded", "limit of requests per hour reached")
                if bucket.remaining < 1:
                    limited_until = now
                    bucket.limited += 1
                    raise ApiError("rate_limit_exceeded", "limit of requests per hour reached")
                bucket.remaining -= 1
                self._apply_faults(method, sub)
                status, payload = self._dispatch(method, sub, query, body, now)
                delay = 0.0
                if method == "POST" and sub == "/servers" and self._lose.count > 0:
                    self._lose.count -= 1
                    if self._lose.mode == "drop":
                        raise Drop()
                    if self._lose.mode == "error":
                        raise ApiError(self._lose.code, "injected: the server was created, this answer is not")
                    delay = self._lose.delay_s
                return status, payload, self._rate_headers(bucket, now), delay
            except ApiError as err:
                error = {"code": err.code, "message": err.message, "details": err.details}
                return err.status, {"error": error}, self._rate_headers(bucket, now, limited_until), 0.0

    def _apply_faults(self, method: str, sub: str) -> None:
        for fault in self._faults:
            if fault.count <= 0:
                continue
            if fault.method is not None and fault.method != method:
                continue
            if fault.path is not None and not sub.startswith(fault.path):
                continue
            fault.count -= 1
            self._faults = [f for f in self._faults if f.count > 0]
            raise ApiError(fault.code, fault.message, fault.status)

    def _dispatch(
        self, method: str, sub: str, query: dict[str, list[str]], body: bytes, now: float
    ) -> tuple[int, dict[str, Any] | None]:
        parts = [p for p in sub.split("/") if p]
        if parts == ["server_types"] and method == "GET":
            names = [n for n in self._types_spec if self._type_available(n)]
            if "name" in query:
                names = [n for n in names if n == query["name"][0]]
            items = [self._server_type_json(n) for n in names]
            return 200, self._page("server_types", items, query)
        if len(parts) == 2 and parts[0] == "server_types" and method == "GET":
            for n in self._types_spec:
                if self._type_available(n) and str(self._types_spec[n][0]) == parts[1]:
                    return 200, {"server_type": self._server_type_json(n)}
            raise ApiError("not_found", "server type not found")
        if parts == ["locations"] and method == "GET":
            names = list(self._locations_spec)
            if "name" in query:
                names = [n for n in names if n == query["name"][0]]
            return 200, self._page("locations", [self._location_json(n) for n in names], query)
        if len(parts) == 2 and parts[0] == "locations" and method == "GET":
            for n, spec in self._locations_spec.items():
                if str(spec[0]) == parts[1]:
                    return 200, {"location": self._location_json(n)}
            raise ApiError("not_found", "location not found")
        if parts == ["images"] and method == "GET":
            return 200, self._page("images", self._list_images(query), query)
        if len(parts) == 2 and parts[0] == "images" and method == "GET":
            image = self._images.get(int(parts[1])) if parts[1].isdigit() else None
            if image is None:
                raise ApiError("not_found", f"image with ID '{parts[1]}' not found")
            return 200, {"image": self._image_json(image)}
        if parts == ["placement_groups"] and method == "GET":
            groups = list(self._placement_groups.values())
            if "name" in query:
                groups = [g for g in groups if g.name == query["name"][0]]
            if "type" in query:
                groups = [g for g in groups if g.type in query["type"]]
            if "label_selector" in query:
                terms = parse_label_selector(query["label_selector"][0])
                groups = [g for g in groups if selector_matches(terms, g.labels)]
            return 200, self._page("placement_groups", [self._placement_group_json(g) for g in groups], query)
        for kind, store, render in (
            ("networks", self._networks, self._network_json),
            ("firewalls", self._firewalls, self._firewall_json),
        ):
            if parts == [kind] and method == "GET":
                found = self._named(list(store.values()), query)
                return 200, self._page(kind, [render(x) for x in found], query)
            if parts == [kind] and method == "POST":
                return 201, self._create_named(kind, body, now)
            if len(parts) == 2 and parts[0] == kind and method == "GET":
                item = store.get(int(parts[1])) if parts[1].isdigit() else None
                if item is None:
                    raise ApiError("not_found", f"{kind[:-1]} with ID '{parts[1]}' not found")
                return 200, {kind[:-1]: render(item)}
        if parts == ["placement_groups"] and method == "POST":
            return 201, self._create_placement_group(body, now)
        if len(parts) == 2 and parts[0] == "placement_groups" and method in ("GET", "DELETE"):
            group = self._placement_groups.get(int(parts[1])) if parts[1].isdigit() else None
            if group is None:
                raise ApiError("not_found", f"placement group with ID '{parts[1]}' not found")
            if method == "DELETE":
                if any(x.placement_group == group.id for x in self._servers.values()):
                    raise ApiError("conflict", "placement group still has servers")
                del self._placement_groups[group.id]
                return 204, None
            return 200, {"placement_group": self._placement_group_json(group)}
        if parts == ["servers"] and method == "GET":
            servers = list(self._servers.values())
            if "name" in query:
                servers = [s for s in servers if s.name == query["name"][0]]
            if "label_selector" in query:
                terms = parse_label_selector(query["label_selector"][0])
                servers = [s for s in servers if selector_matches(terms, s.labels)]
            items = [self._server_json(s, now) for s in servers]
            if "status" in query:
                items = [i for i in items if i["status"] in query["status"]]
            return 200, self._page("servers", items, query)
        if parts == ["servers"] and method == "POST":
            return 201, self._create_server(body, now)
        if len(parts) >= 2 and parts[0] == "servers":
            server = self._servers.get(int(parts[1])) if parts[1].isdigit() else None
            if server is None:
                raise ApiError("not_found", f"server with ID '{parts[1]}' not found")
            if len(parts) == 2 and method == "GET":
                return 200, {"server": self._server_json(server, now)}
            if len(parts) == 2 and method == "DELETE":
                return 200, {"action": self._delete_server(server, now).json(now)}
            if len(parts) == 4 and parts[2] == "actions" and method == "POST":
                return 201, {"action": self._server_action(server, parts[3], body, now).json(now)}
            if len(parts) == 3 and parts[2] == "actions" and method == "GET":
                items = [a.json(now) for a in self._actions.values() if any(r["id"] == server.id for r in a.resources)]
                return 200, self._page("actions", items, query)
            if len(parts) == 4 and parts[2] == "actions" and method == "GET":
                action = self._actions.get(int(parts[3])) if parts[3].isdigit() else None
                if action is None:
                    raise ApiError("not_found", "action not found")
                return 200, {"action": action.json(now)}
        if len(parts) == 2 and parts[0] == "actions" and method == "GET":
            action = self._actions.get(int(parts[1])) if parts[1].isdigit() else None
            if action is None:
                raise ApiError("not_found", f"action with ID '{parts[1]}' not found")
            return 200, {"action": action.json(now)}
        if parts == ["actions"] and method == "GET":
            ids = {int(i) for i in query.get("id", []) if i.isdigit()}
            items = [a.json(now) for a in self._actions.values() if not ids or a.id in ids]
            return 200, self._page("actions", items, query)
        raise ApiError("not_found", f"{method} {sub} is not served by the fake")

    def _list_images(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        """GET /images filters: name, type, status, architecture, label_selector; sort by created/id."""
        images = list(self._images.values())
        if "name" in query:
            images = [i for i in images if i.name == query["name"][0]]
        if "type" in query:
            images = [i for i in images if i.type in query["type"]]
        if "architecture" in query:
            images = [i for i in images if i.architecture in query["architecture"]]
        if "status" in query:
            wrong = [v for v in query["status"] if v not in ("available", "creating", "unavailable")]
            if wrong:
                raise ApiError("invalid_input", f"invalid input in field 'status': {wrong[0]!r}")
            if "available" not in query["status"]:
                images = []  # every image of the fake is available
        if "label_selector" in query:
            terms = parse_label_selector(query["label_selector"][0])
            images = [i for i in images if selector_matches(terms, i.labels)]
        for sort in reversed(query.get("sort", [])):
            key, _, order = sort.partition(":")
            if key not in ("id", "created", "name"):
                raise ApiError("invalid_input", f"invalid input in field 'sort': {sort!r}")
            images.sort(key=lambda i, k=key: getattr(i, k) or "", reverse=order == "desc")
        return [self._image_json(i) for i in images]

    def _resolve_image(self, ref: Any, architecture: str) -> _Image:
        """A create's `image`: an id, or a name looked up for the server type's architecture."""
        text = str(ref)
        if text.isdigit():
            image = self._images.get(int(text))
            if image is None:
                raise ApiError("invalid_input", f"image {text} not found")
            if image.architecture != architecture:
                raise ApiError(
                    "invalid_input",
                    f"image {text} has architecture {image.architecture}, the server type needs {architecture}",
                )
            return image
        for image in self._images.values():
            if image.name == text and image.architecture == architecture:
                return image
        raise ApiError("invalid_input", f"image {text!r} not found for architecture {architecture}")

    def _create_named(self, kind: str, body: bytes, now: float) -> dict[str, Any]:
        """POST /networks {name, ip_range, subnets} or /firewalls {name}."""
        data = _json_body(body)
        name = _named(data)
        store: dict[int, Any] = self._networks if kind == "networks" else self._firewalls
        if any(x.name == name for x in store.values()):
            raise ApiError("uniqueness_error", f"{kind[:-1]} name is already used")
        labels = self._validate_labels(data.get("labels") or {})
        if kind == "networks":
            ip_range = str(data.get("ip_range") or "")
            try:
                ipaddress.ip_network(ip_range)
            except ValueError as exc:
                raise ApiError("invalid_input", "invalid input in field 'ip_range'") from exc
            subnets = [str(x.get("ip_range")) for x in data.get("subnets") or [] if isinstance(x, dict)]
            item: Any = _Network(self._next_resource_id, name, ip_range, subnets, labels, now)
        else:
            item = _Firewall(self._next_resource_id, name, labels, now)
        self._next_resource_id += 1
        store[item.id] = item
        return {kind[:-1]: (self._network_json(item) if kind == "networks" else self._firewall_json(item))}

    def _server_action(self, server: _Server, command: str, body: bytes, now: float) -> _Action:
        """attach_to_network {network, ip_range} and poweron, the two a server created off needs."""
        data = _json_body(body)
        if command == "poweron":
            if not server.start:
                server.start = True
                server.running_at = max(server.running_at, now + self.action_delay_s)
                server.boot_at = max(server.boot_at, now + max(self.action_delay_s, self.boot_delay_s))
            return self._new_action("start_server", server.id, self.action_delay_s, now)
        if command == "attach_to_network":
            network = (
                self._networks.get(int(data.get("network", 0))) if str(data.get("network", "")).isdigit() else None
            )
            if network is None:
                raise ApiError("not_found", f"network {data.get('network')!r} not found")
            if network.id in server.networks:
                raise ApiError("server_already_attached", "server is already attached to the network")
            ip_range = data.get("ip_range")
            if ip_range is not None:
                if ip_range not in network.subnets:
                    raise ApiError("invalid_input", f"ip_range {ip_range!r} is no subnet of network {network.id}")
                server.subnet_of[network.id] = str(ip_range)
            server.networks.append(network.id)
            return self._new_action("attach_to_network", server.id, self.action_delay_s, now)
        raise ApiError("not_found", f"action {command!r} not found")

    def _create_placement_group(self, body: bytes, now: float) -> dict[str, Any]:
        data = _json_body(body)
        name = _named(data)
        if data.get("type") != "spread":
            raise ApiError("invalid_input", f"invalid input in field 'type': {data.get('type')!r}")
        if any(g.name == name for g in self._placement_groups.values()):
            raise ApiError(
                "uniqueness_error", "placement group name is already used", details={"fields": [{"name": "name"}]}
            )
        labels = self._validate_labels(data.get("labels") or {})
        group = _PlacementGroup(self._next_placement_group_id, name, "spread", labels, now)
        self._next_placement_group_id += 1
        self._placement_groups[group.id] = group
        return {"placement_group": self._placement_group_json(group), "action": None}

    def _page(self, key: str, items: list[dict[str, Any]], query: dict[str, list[str]]) -> dict[str, Any]:
        try:
            page = max(1, int(query.get("page", ["1"])[0]))
            per_page = min(50, max(1, int(query.get("per_page", ["25"])[0])))
        except ValueError as exc:
            raise ApiError("invalid_input", "page and per_page must be integers") from exc
        total = len(items)
        last = max(1, math.ceil(total / per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        return {
            key: chunk,
            "meta": {
                "pagination": {
                    "page": page,
                    "per_page": per_page,
                    "previous_page": page - 1 if page > 1 else None,
                    "next_page": page + 1 if page < last else None,
                    "last_page": last,
                    "total_entries": total,
                }
            },
        }

    def _validate_labels(self, labels: Any) -> dict[str, str]:
        if not isinstance(labels, dict):
            raise ApiError("invalid_input", "labels must be an object")
        for key, value in labels.items():
            prefix, _, name = key.rpartition("/")
            bad_key = not _LABEL_NAME.match(name) or (prefix and not _DNS_SUBDOMAIN.match(prefix))
            if bad_key or prefix == "hetzner.cloud":
                raise ApiError("invalid_input", f"invalid label key '{key}'")
            if not isinstance(value, str) or not _LABEL_VALUE.match(value):
                raise ApiError("invalid_input", f"invalid label value '{value}' for '{key}'")
        return {str(k): str(v) for k, v in labels.items()}

    def _create_server(self, body: bytes, now: float) -> dict[str, Any]:
        data = _json_body(body)
        name = data.get("name")
        if not isinstance(name, str) or not _HOSTNAME.match(name):
            raise ApiError("invalid_input", f"invalid input in field 'name': {name!r}")
        type_ref = str(data.get("server_type", "")).lower()
        type_name = next((n for n, spec in self._types_spec.items() if type_ref in (n, str(spec[0]))), None)
        if type_name is None or not self._type_available(type_name):
            raise ApiError("invalid_input", f"server type {type_ref!r} not found")
        location = data.get("location") or next(iter(self._locations_spec))
        location = next(
            (n for n, spec in self._locations_spec.items() if str(location) in (n, str(spec[0]))),
            None,
        )
        if location is None:
            raise ApiError("invalid_input", f"location {data.get('location')!r} not found")
        if not data.get("image"):
            raise ApiError("invalid_input", "invalid input in field 'image': is required")
        image = self._resolve_image(data["image"], self._types_spec[type_name][4])
        group_id = data.get("placement_group")
        if group_id is not None:
            group = self._placement_groups.get(int(group_id)) if str(group_id).isdigit() else None
            if group is None:
                raise ApiError("invalid_input", f"placement group {group_id} not found")
            members = sum(1 for x in self._servers.values() if x.placement_group == group.id)
            if group.type == "spread" and members >= SPREAD_GROUP_MAX:
                raise ApiError("placement_error", f"placement group {group.id} is full ({SPREAD_GROUP_MAX} servers)")
        networks = [int(n) for n in data.get("networks") or []]
        for n in networks:
            if n not in self._networks:
                raise ApiError("invalid_input", f"network {n} not found")
        firewalls = [int(f["firewall"]) for f in data.get("firewalls") or []]
        for f in firewalls:
            if f not in self._firewalls:
                raise ApiError("invalid_input", f"firewall {f} not found")
        public_net = data.get("public_net") or {}
        user_data = data.get("user_data") or ""
        if len(user_data.encode()) > 32 * 1024:
            raise ApiError("invalid_input", "user_data is limited to 32 KiB")
        labels = self._validate_labels(data.get("labels") or {})
        if any(s.name == name for s in self._servers.values()):
            raise ApiError(
                "uniqueness_error",
                "server name is already used",
                details={"fields": [{"name": "name"}]},
            )
        type_json = self._server_type_json(type_name)
        offered = {entry["name"]: entry for entry in type_json["locations"]}
        if location not in offered:
            raise ApiError("invalid_input", f"server type {type_name} is not available in {location}")
        dep = offered[location]["deprecation"]
        if (
            dep is not None
            and datetime.fromisoformat(dep["unavailable_after"].replace("Z", "+00:00")).timestamp() <= now
        ):
            raise ApiError("invalid_input", f"server type {type_name} is deprecated in {location}")
        if self.server_limit is not None and len(self._servers) >= self.server_limit:
            raise ApiError(
                "resource_limit_exceeded",
                "server limit exceeded",
                details={"limits": [{"name": "server_limit"}]},
            )
        key = (type_name, location)
        left = self._capacity.get(key)
        if left is not None and left <= 0:
            raise ApiError(
                "resource_unavailable",
                f"server type {type_name} unavailable in location {location}",
            )
        if left is not None:
            self._capacity[key] = left - 1
        server = _Server(
            id=self._next_server_id,
            name=name,
            server_type=type_name,
            location=location,
            image=image.name or str(image.id),
            image_id=image.id,
            labels=labels,
            user_data=user_data,
            created=now,
            start=data.get("start_after_create", True) is not False,
            running_at=now + self.action_delay_s,
            boot_at=now + max(self.action_delay_s, self.boot_delay_s),
            networks=networks,
            firewalls=firewalls,
            public_ipv4=public_net.get("enable_ipv4", True) is not False,
            public_ipv6=public_net.get("enable_ipv6", True) is not False,
            placement_group=int(group_id) if group_id is not None else None,
        )
        self._next_server_id += 1
        self._servers[server.id] = server
        self.created_total += 1
        create = self._new_action("create_server", server.id, self.action_delay_s, now)
        start = self._new_action("start_server", server.id, self.action_delay_s, now)
        return {
            "server": self._server_json(server, now),
            "action": create.json(now),
            "next_actions": [start.json(now)] if server.start else [],
            "root_password": None if data.get("ssh_keys") else "sim-root-password",
        }

    def _delete_server(self, server: _Server, now: float) -> _Action:
        del self._servers[server.id]
        key = (server.server_type, server.location)
        if key in self._capacity:
            self._capacity[key] += 1
        if server.node_registered:
            self._node_deletes.append(server.name)
        return self._new_action("delete_server", server.id, self.action_delay_s, now)

    # ------------------------------------------------------------------ control API

    def _control(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        try:
            data = parse_json(body, {})
        except ValueError:
            return 400, {"error": "invalid JSON"}
        if method == "GET" and path == "/stats":
            return 200, self.stats()
        if method == "GET" and path == "/servers":
            return 200, {"servers": self.servers()}
        if method == "POST" and path == "/faults":
            self.inject_fault(
                data["code"],
                int(data.get("count", 1)),
                status=data.get("status"),
                method=data.get("method"),
                path=data.get("path"),
                message=data.get("message", "injected fault"),
            )
            return 200, {}
        if method == "POST" and path == "/rate_remaining":
            self.set_rate_remaining(float(data["remaining"]), data.get("project", DEFAULT_PROJECT))
            return 200, {}
        if method == "POST" and path == "/rate_limit_storm":
            self.rate_limit_storm(int(data.get("count", 1)), float(data.get("reset_in_s", 30.0)))
            return 200, {}
        if method == "POST" and path == "/capacity":
            self.set_capacity(data["server_type"], data["location"], data.get("count"))
            return 200, {}
        if method == "POST" and path == "/server_limit":
            self.set_server_limit(data.get("limit"))
            return 200, {}
        if method == "POST" and path == "/lose_create_responses":
            try:
                self.lose_create_responses(
                    int(data.get("count", 1)),
                    data.get("mode", "drop"),
                    float(data.get("delay_s", 5.0)),
                    data.get("code", "server_error"),
                )
            except ValueError as e:
                return 400, {"error": str(e)}
            return 200, {}
        if method == "POST" and path == "/action_delay":
            with self._lock:
                self.action_delay_s = float(data.get("seconds", 0.0))
            return 200, {}
        if method == "POST" and path == "/reset_faults":
            self.reset_faults()
            return 200, {}
        m = re.match(r"^/server_types/([a-z0-9]+)(/deprecate)?$", path)
        if m and method == "DELETE" and not m.group(2):
            self.remove_server_type(m.group(1))
            return 200, {}
        if m and method == "POST" and m.group(2):
            self.deprecate_server_type(m.group(1), data.get("unavailable_after"), data.get("locations"))
            return 200, {}
        return 404, {"error": f"no control endpoint {method} {path}"}

    # ------------------------------------------------------------------ boot: cloud-init + kubelet

    def _boot_loop(self) -> None:
        while not self._stop.wait(0.05):
            with self._lock:
                now = time.time()
                due = [
                    s
                    for s in self._servers.values()
                    if s.start
                    and not s.node_registered
                    and not s.join_refused
                    and s.boot_at <= now
                    and s.register_attempts < 50
                ]
                deletes, self._node_deletes = self._node_deletes, []
            for name in deletes:
                if self.kubelet is not None:
                    self.kubelet.machine_deleted(name)
            for server in due:
                self._boot(server)

    def _boot(self, server: _Server) -> None:
        if self.kubelet is None:
            with self._lock:
                server.register_attempts = 50  # no cluster configured: the server just runs
            return
        result = self.kubelet.join(self._machine(server))
        with self._lock:
            server.register_attempts += 1
            if result == "refused":
                server.join_refused = True
                self.join_refused.append(server.name)
            elif result == "joined":
                server.node_registered = server.id in self._servers
                if server.id not in self._servers:
                    # Deleted while registering: the Node must go too.
                    self._node_deletes.append(server.name)

    def _machine(self, server: _Server) -> Machine:
        _tid, cores, memory, disk, arch, _cpu, _net = self._types_spec[server.server_type]
        return Machine(
            name=server.name,
            provider_id=f"hcloud://{server.id}",
            user_data=server.user_data,
            cpu_cores=cores,
            memory_bytes=int(memory * GIB),
            disk_gb=disk,
            arch="arm64" if arch == "arm" else "amd64",
            os_image=server.image,
            serial=server.id,
            # What hcloud-cloud-controller-manager labels a node with once it registers.
            cloud_labels={
                "node.kubernetes.io/instance-type": server.server_type,
                "topology.kubernetes.io/region": server.location,
                "topology.kubernetes.io/zone": f"{server.location}-dc1",
            },
        )


def main() -> int:
    parser = argparse.ArgumentParser(description="Fake Hetzner Cloud API on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--token", default="sim-token")
    parser.add_argument("--kube-url", default=None)
    parser.add_argument("--kube-token", default=None)
    parser.add_argument("--join-token", default=None)
    parser.add_argument("--boot-delay", type=float, default=1.0)
    parser.add_argument("--action-delay", type=float, default=0.0)
    args = parser.parse_args()
    sim = FakeHetzner(
        args.token,
        port=args.port,
        kube_url=args.kube_url,
        kube_token=args.kube_token,
        join_token=args.join_token,
        boot_delay_s=args.boot_delay,
        action_delay_s=args.action_delay,
    )
    # Never the token: logs are scanned for secrets (tests/e2e/leaks.py).
    return serve_until_interrupted(sim, lambda s: f"fake Hetzner API at {s.url} (control at {s.base_url}/sim/v1)")


if __name__ == "__main__":
    sys.exit(main())
