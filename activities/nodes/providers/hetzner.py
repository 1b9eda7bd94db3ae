"""Hetzner Cloud node provider on the official `hcloud` client.

What it guards against (the complaints about Cluster Autoscaler's Hetzner provider):
- `resource_unavailable` in one location tries the next configured location, then reports
  `no_capacity` so the NodeRequest moves on to the next pool instead of retrying in place;
- a server type Hetzner removed or deprecated makes only its pool unusable (reported by
  `unusable_types()`); the catalogue never raises for it;
- the 3,600 requests/hour limit per project: every request passes the project's gate
  (`hetzner_budget.py`), which paces on the RateLimit-* headers and lets scale-up creates go
  before look-ups, deletes and listing; the catalogue, snapshot look-ups and placement groups
  are cached, a first create costs one POST (no look-up first: the name is derived from the
  request, so a second create of it is refused as `uniqueness_error` and found instead; a retry
  looks first), no action polling; a rate-limited call surfaces as a retryable error whose delay
  is the time until the limit resets;
- images per architecture: a pool's image (`image`, or `images_for_arch` keyed amd64/arm64 as
  Cluster Autoscaler's imagesForArch) is a name, an id or a label selector (the newest matching
  snapshot of the server type's architecture wins, as Cluster Autoscaler's findImage picks it),
  so one group can mix CAX (arm) and CX (x86) types;
- `placement_group: spread` creates and fills spread placement groups of at most 10 servers
  (Hetzner's limit) per pool, so a pool asks for spread without naming a group id;
- what Cluster Autoscaler's users configure, done as CA does it: networks, firewalls and a
  placement group by id or name (a name is looked up once per cache period), `server_labels`
  set on the server at create, `public_ipv4/ipv6: false` (created without those addresses),
  `subnet_ip_range` (created off, attached to the network in that subnet, then started), and
  `create_timeout_s` bounding the create call (CA's HCLOUD_SERVER_CREATION_TIMEOUT).

Secrets never pass through workflow inputs: the API token comes from HCLOUD_TOKEN or a token
file, the cluster join token/endpoint from env or files, read when an activity runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import requests
from hcloud import APIException, Client
from hcloud.firewalls import Firewall
from hcloud.images import Image
from hcloud.locations import Location
from hcloud.networks import Network
from hcloud.placement_groups import PlacementGroup
from hcloud.server_types import ServerType as HServerType
from hcloud.servers import BoundServer, Server, ServerCreatePublicNetwork
from hcloud.ssh_keys import SSHKey
from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.answers import MAX_ANSWER_BYTES, quoted
from activities.nodes.providers.cloudinit import render_user_data
from activities.nodes.providers.hetzner_budget import BudgetAdapter, ProjectBudget, spending
from activities.secrets import read_secret
from scaling.kube.labels import label_value, request_key
from scaling.kube.models import LABEL_ARCH, LABEL_INSTANCE_TYPE, Resources
from scaling.nodes.contracts import CreateNodeInput, CreateNodeResult, DeleteNodeInput, ProviderMachine
from scaling.nodes.models import LABEL_CLUSTER, LABEL_GROUP, LABEL_POOL, LABEL_REQUEST, ServerType
from scaling.nodes.providers.hetzner import (
    SPREAD_GROUP_MAX,
    ErrorDecision,
    ImageRef,
    decide_error,
    hetzner_architecture,
    image_ref,
    is_id,
    pick_placement_group,
    placement_group_name,
    pool_locations,
    server_type_from_api,
    topology_labels,
    unusable_reason,
    wants_spread,
)
from scaling.nodes.providers.hetzner_budget import BudgetSettings, RequestKind

LABEL_ATTEMPT = "growth.autoscaling.dev/attempt"
PROVIDER_ID_PREFIX = "hcloud://"
MIB = 1024**2

T = TypeVar("T")


class HetznerAnswerTooLarge(requests.RequestException):
    """An answer over MAX_ANSWER_BYTES (by its Content-Length): never read."""


class HetznerSettings(BaseModel):
    """Worker-side settings; none of these are secrets (secrets are read from env/files)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key in the worker config is an error

    api_endpoint: str = "https://api.hetzner.cloud/v1"
    token_env: str = "HCLOUD_TOKEN"
    token_file: str | None = None
    join_token_env: str = "GROWTH_JOIN_TOKEN"
    join_token_file: str | None = None
    join_endpoint_env: str = "GROWTH_JOIN_ENDPOINT"
    join_endpoint: str = ""
    ca_cert_hash_env: str = "GROWTH_JOIN_CA_CERT_HASH"
    locations: list[str] = Field(default_factory=lambda: ["fsn1", "nbg1", "hel1"])
    image: str = "ubuntu-24.04"
    system_reserve: Resources = Resources(cpu_m=200, memory=512 * MIB, pods=0)
    max_pods: int = 110
    cache_ttl_s: float = 300.0
    allow_deprecated: bool = False
    # hcloud's own behaviour: action polling and its retries of 429/502/504/timeouts.
    poll_interval_s: float = 1.0
    retry_max_retries: int = 5
    retry_base_s: float = 1.0
    retry_cap_s: float = 60.0
    timeout_s: float = 30.0
    # The most one create may take, hcloud's retries included (Cluster Autoscaler's
    # HCLOUD_SERVER_CREATION_TIMEOUT, 5 minutes by default); past it the server is looked up
    # by its request labels, never created twice. Waiting for the Node is the loop's
    # readiness_timeout_s (CA's --max-node-provision-time).
    create_timeout_s: float = Field(300.0, gt=0)
    default_rate_limit_retry_s: float = 60.0
    # A location that answered resource_unavailable for a type is skipped for this long (each
    # try costs a request from the project's budget; capacity rarely returns within a minute).
    capacity_memory_s: float = 60.0
    max_concurrent_calls: int = Field(16, gt=0)  # the provider's own threads (hcloud blocks)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)


@dataclass
class _Catalogue:
    fetched_at: float
    types: dict[str, dict[str, Any]]  # name → server type JSON
    locations: set[str]


class _RateLimitSeen(threading.local):
    reset_at: float | None = None


def _server_type_json(bound: Any) -> dict[str, Any]:
    """The API shape of an hcloud ServerType, for the pure functions in scaling.hetzner."""
    model = bound.data_model

    def dep(d: Any) -> dict[str, Any] | None:
        if d is None:
            return None
        return {
            "announced": d.announced.isoformat() if d.announced else None,
            "unavailable_after": d.unavailable_after.isoformat() if d.unavailable_after else None,
        }

    return {
        "name": model.name,
        "cores": model.cores,
        "memory": model.memory,
        "disk": model.disk,
        "architecture": model.architecture,
        "prices": model.prices or [],
        "deprecation": dep(getattr(model, "_deprecation", None)),
        "locations": [
            {
                "name": loc.location.name,
                "deprecation": dep(loc.deprecation),
                "available": loc.available,
            }
            for loc in (model.locations or [])
        ],
    }


def _hostname_part(value: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", value.lower())).strip("-")


def server_name(inp: CreateNodeInput) -> str:
    """RFC 1123 hostname, unique per (request, attempt), readable: <cluster>-<pool>-<hash>."""
    digest = hashlib.sha256(f"{inp.request_id}#{inp.attempt}".encode()).hexdigest()[:10]
    prefix = _hostname_part(f"{inp.cluster}-{inp.pool.name}")[:52].strip("-")
    return f"{prefix}-{digest}" if prefix else f"growth-{digest}"


def server_labels(inp: CreateNodeInput) -> dict[str, str]:
    """Hetzner labels: who owns the machine and which request/attempt created it."""
    return {
        LABEL_CLUSTER: label_value(inp.cluster),
        LABEL_GROUP: label_value(inp.pool.group),
        LABEL_POOL: label_value(inp.pool.name),
        LABEL_REQUEST: request_key(inp.request_id),
        LABEL_ATTEMPT: str(inp.attempt),
    }


class HetznerProvider:
    """NodeProvider for Hetzner Cloud. One instance per worker; safe to call concurrently."""

    name = "hetzner"

    def __init__(self, settings: HetznerSettings | None = None, **overrides: Any) -> None:
        base = settings or HetznerSettings()
        self.settings = base.model_copy(update=overrides) if overrides else base
        self._local = threading.local()  # one hcloud Client (requests.Session) per thread
        self._cache_lock = threading.Lock()
        self._catalogue: _Catalogue | None = None
        self._catalogue_lock: asyncio.Lock | None = None
        self._requests = 0
        self._count_lock = threading.Lock()
        self._rate_seen = _RateLimitSeen()
        self.last_rate_limit_remaining: int | None = None
        s = self.settings
        # One gate per worker: every loop's calls pass it. Workers (and other tools) of the project
        # stay in step through the RateLimit-* headers, the count Hetzner keeps for all of them.
        self.budget = ProjectBudget(s.budget)
        self._executor = ThreadPoolExecutor(max_workers=s.max_concurrent_calls, thread_name_prefix="hetzner")
        self._images: dict[tuple[str, str], tuple[float, int]] = {}  # (selector, arch) → (fetched, id)
        self._groups_lock = threading.Lock()
        self._groups: dict[str, dict[int, int]] = {}  # group name prefix → {group id: servers}
        self._no_capacity: dict[tuple[str, str], float] = {}  # (type, location) → monotonic time seen
        self._refs: dict[tuple[str, str], tuple[float, int]] = {}  # (kind, name) → (fetched, id)
        self._subnets: dict[int, tuple[float, set[str]]] = {}  # network id → (fetched, subnet ranges)

    @classmethod
    def from_settings(cls, cfg: dict[str, Any] | None = None) -> HetznerProvider:
        """From the worker config's `providers.hetzner` mapping (HetznerSettings fields)."""
        return cls(HetznerSettings.model_validate(cfg or {}))

    # ------------------------------------------------------------------ plumbing

    @property
    def request_count(self) -> int:
        """HTTP requests this provider sent (responses received plus transport failures)."""
        return self._requests

    def _count(self) -> None:
        with self._count_lock:
            self._requests += 1

    def _client(self) -> Client:
        token = read_secret(self.settings.token_env, self.settings.token_file)
        client: Client | None = getattr(self._local, "client", None)
        if client is not None and getattr(self._local, "token", None) == token:
            return client
        if not token:
            where = self.settings.token_file or f"${self.settings.token_env}"
            raise ApplicationError(f"no Hetzner API token: set {where}", type="InvalidToken", non_retryable=True)
        s = self.settings
        client = Client(
            token=token,
            api_endpoint=s.api_endpoint,
            application_name="growth",
            poll_interval=s.poll_interval_s,
            timeout=s.timeout_s,
        )
        base = client._client  # hcloud exposes no public knob for its retry schedule
        base._retry_max_retries = s.retry_max_retries
        base._retry_interval_func = lambda retries: min(s.retry_cap_s, s.retry_base_s * 2**retries)
        base._session.hooks["response"].append(self._on_response)
        adapter = BudgetAdapter(self.budget)
        base._session.mount("https://", adapter)
        base._session.mount("http://", adapter)
        self._local.client = client
        self._local.token = token
        return client

    def _on_response(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self._count()
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > MAX_ANSWER_BYTES:
            # refused before hcloud reads it: a transport failure, retried like one
            response.close()
            raise HetznerAnswerTooLarge(f"Hetzner answered {length} bytes, over {MAX_ANSWER_BYTES}: refused")
        remaining = response.headers.get("RateLimit-Remaining")
        if remaining is not None and remaining.isdigit():
            self.last_rate_limit_remaining = int(remaining)
        if response.status_code == 429:
            reset = response.headers.get("RateLimit-Reset")
            self._rate_seen.reset_at = float(reset) if reset and reset.isdigit() else None

    async def _call(self, fn: Callable[[Client], T], kind: RequestKind = RequestKind.CREATE) -> T:
        """Run one blocking hcloud call in a thread, its requests counted as `kind` by the
        project's budget; map auth and rate-limit errors."""

        def run() -> T:
            client = self._client()
            self._rate_seen.reset_at = None
            try:
                with spending(kind):
                    return fn(client)
            except APIException as exc:
                # the API's own message, cut before it becomes the activity's failure
                exc.message = quoted(exc.message)
                exc.args = (f"{exc.message} ({exc.code})",)
                translated = self._translate(exc)
                if translated is exc:
                    raise
                raise translated from exc
            except requests.RequestException:
                self._count()
                raise

        # Wait for the budget without a thread, then send on the provider's own threads: calls
        # waiting for the budget never hold the threads the Kubernetes activities run on.
        await self.budget.ready(kind)
        return await asyncio.get_running_loop().run_in_executor(self._executor, run)

    def _translate(self, exc: APIException) -> Exception:
        decision = decide_error(exc.code)
        if decision is ErrorDecision.INVALID_TOKEN:
            return ApplicationError(
                "Hetzner API rejected the token (401 unauthorized): the token in "
                f"{self.settings.token_file or '$' + self.settings.token_env} is invalid or revoked",
                type="InvalidToken",
                non_retryable=True,
            )
        if decision is ErrorDecision.FORBIDDEN:
            return ApplicationError(
                f"Hetzner API refused the request ({exc.code}): the token lacks write permission",
                type="HetznerForbidden",
                non_retryable=True,
            )
        if decision is ErrorDecision.RATE_LIMITED:
            reset_at = self._rate_seen.reset_at
            delay = self.settings.default_rate_limit_retry_s
            if reset_at is not None:
                delay = max(1.0, reset_at - time.time())
            return ApplicationError(
                f"Hetzner API rate limit exceeded; retry in {delay:.0f}s when it resets",
                {"retry_after_s": delay},
                type="HetznerRateLimited",
                next_retry_delay=timedelta(seconds=delay),
            )
        return exc

    # ------------------------------------------------------------------ catalogue

    def _fetch_catalogue(self, client: Client) -> _Catalogue:
        types = {str(t.name).lower(): _server_type_json(t) for t in client.server_types.get_all()}
        locations = {str(loc.name) for loc in client.locations.get_all()}
        return _Catalogue(fetched_at=time.monotonic(), types=types, locations=locations)

    async def _get_catalogue(self, force: bool = False) -> _Catalogue:
        cached = self._catalogue
        if cached is not None and not force and time.monotonic() - cached.fetched_at < self.settings.cache_ttl_s:
            return cached
        # One fetch at a time: a burst's creates all find the cache empty at once, and each
        # fetch costs two requests of the project's budget.
        if self._catalogue_lock is None:
            self._catalogue_lock = asyncio.Lock()
        async with self._catalogue_lock:
            cached = self._catalogue
            if cached is not None and not force and time.monotonic() - cached.fetched_at < self.settings.cache_ttl_s:
                return cached
            try:
                fresh = await self._call(self._fetch_catalogue)
            except ApplicationError as err:
                if err.type == "InvalidToken" or cached is None:
                    raise
                return cached  # rate limited: a stale catalogue beats no catalogue
            except (APIException, requests.RequestException):
                if cached is None:
                    raise
                return cached
            with self._cache_lock:
                self._catalogue = fresh
            return fresh

    def _locations_for(self, config: dict[str, Any]) -> list[str]:
        return pool_locations(config) or list(self.settings.locations)

    async def server_types(self) -> list[ServerType]:
        """Usable server types (allocatable after the system reserve, hourly net price in the
        first configured location). Unusable ones are left out; see unusable_types()."""
        cat = await self._get_catalogue()
        now = datetime.now(UTC)
        out: list[ServerType] = []
        for _name, data in sorted(cat.types.items()):
            locations = [loc for loc in self.settings.locations if loc in cat.locations]
            if unusable_reason(data, locations, now, self.settings.allow_deprecated) is not None:
                continue
            out.append(server_type_from_api(data, locations, self.settings.system_reserve, self.settings.max_pods))
        return out

    async def unusable_types(
        self, wanted: list[str] | None = None, locations: list[str] | None = None
    ) -> dict[str, str]:
        """Server type → why a pool of it cannot get machines (removed, deprecated, not in the
        configured locations). `wanted` adds types the API no longer lists at all."""
        cat = await self._get_catalogue()
        now = datetime.now(UTC)
        locs = [loc for loc in (locations or self.settings.locations) if loc in cat.locations]
        names = set(cat.types) | {w.lower() for w in wanted or []}
        problems: dict[str, str] = {}
        for name in sorted(names):
            reason = unusable_reason(cat.types.get(name), locs, now, self.settings.allow_deprecated)
            if reason is not None:
                problems[name] = reason
        return problems

    # ------------------------------------------------------------------ create

    def _find(self, client: Client, labels: dict[str, str]) -> BoundServer | None:
        selector = f"{LABEL_REQUEST}={labels[LABEL_REQUEST]},{LABEL_ATTEMPT}={labels[LABEL_ATTEMPT]}"
        found = client.servers.get_list(label_selector=selector, per_page=1).servers
        return found[0] if found else None

    @staticmethod
    def _created(server: BoundServer, message: str = "") -> CreateNodeResult:
        return CreateNodeResult(
            outcome="created",
            node_name=str(server.name),
            provider_id=f"{PROVIDER_ID_PREFIX}{server.id}",
            message=message,
        )

    def _join_secrets(self) -> tuple[str, str, str]:
        s = self.settings
        token = read_secret(s.join_token_env, s.join_token_file)
        endpoint = s.join_endpoint or os.environ.get(s.join_endpoint_env, "").strip()
        if not token or not endpoint:
            raise ApplicationError(
                "cluster join credentials missing: set the join token "
                f"({s.join_token_file or '$' + s.join_token_env}) and endpoint "
                f"(join_endpoint or ${s.join_endpoint_env})",
                type="HetznerJoinSecretMissing",
                non_retryable=True,
            )
        return token, endpoint, os.environ.get(s.ca_cert_hash_env, "").strip()

    def _node_labels(self, inp: CreateNodeInput, st: ServerType | None, location: str = "") -> dict[str, str]:
        labels = {k: label_value(v) for k, v in inp.labels.items()}
        if location:  # the region label the cloud controller manager would set (fsn1)
            labels.update(topology_labels(location))
        labels.setdefault(LABEL_CLUSTER, label_value(inp.cluster))
        labels.setdefault(LABEL_GROUP, label_value(inp.pool.group))
        labels.setdefault(LABEL_POOL, label_value(inp.pool.name))
        labels.setdefault(LABEL_REQUEST, request_key(inp.request_id))
        labels.setdefault(LABEL_INSTANCE_TYPE, inp.pool.server_type.lower())
        if st is not None and st.arch == "arm64":
            labels[LABEL_ARCH] = "arm64"
        return labels

    async def _image(self, config: dict[str, Any], arch: str) -> Image:
        """The pool's image for `arch`; a label selector costs one look-up per cache period."""
        ref: ImageRef = image_ref(config, self.settings.image, arch)
        if ref.kind == "id":
            return Image(id=int(ref.value))
        if ref.kind == "name":
            return Image(name=ref.value)
        harch = hetzner_architecture(arch)
        cached = self._images.get((ref.value, harch))
        if cached is not None and time.monotonic() - cached[0] < self.settings.cache_ttl_s:
            return Image(id=cached[1])
        # hcloud 2.27's images.get_list sends per_page as `status`, so the status filter is
        # applied here: the newest available snapshot of one page (newest first).
        page = await self._call(
            lambda c: (
                c.images.get_list(
                    label_selector=ref.value,
                    type=["snapshot"],
                    architecture=[harch],
                    sort=["created:desc"],
                    per_page=10,
                ).images
            )
        )
        found = [i for i in page if i.status == "available"]
        if not found:
            field = f"images_for_arch.{arch}" if (config.get("images_for_arch") or {}).get(arch) else "image"
            raise ApplicationError(
                f"pool config {field}: no available {harch} snapshot matches label selector {ref.value!r}",
                type="HetznerInvalidConfig",
                non_retryable=True,
            )
        self._images[(ref.value, harch)] = (time.monotonic(), int(found[0].id))
        return Image(id=int(found[0].id))

    async def _ref_id(self, kind: str, ref: Any, field: str) -> int:
        """The id of a network, firewall or placement group given by id or name. A name costs one
        list (`?name=`) per cache period, as Cluster Autoscaler resolves HCLOUD_NETWORK and
        placementGroup names; a name the project does not hold is a config error."""
        if is_id(ref):
            return int(ref)
        name = str(ref)
        cached = self._refs.get((kind, name))
        if cached is not None and time.monotonic() - cached[0] < self.settings.cache_ttl_s:
            return cached[1]
        lookups = {
            "networks": lambda c: c.networks.get_by_name(name),
            "firewalls": lambda c: c.firewalls.get_by_name(name),
            "placement_groups": lambda c: c.placement_groups.get_by_name(name),
        }
        found = await self._call(lookups[kind], RequestKind.POLL)
        if found is None:
            raise ApplicationError(
                f"pool config {field}: no {kind.rstrip('s').replace('_', ' ')} named {name!r} in the project",
                type="HetznerInvalidConfig",
                non_retryable=True,
            )
        self._refs[(kind, name)] = (time.monotonic(), int(found.id))
        return int(found.id)

    async def _check_subnet(self, config: dict[str, Any]) -> None:
        """A pool's `subnet_ip_range` must be one of its network's subnets (Cluster Autoscaler's
        isIpRangeInNetwork, checked at start): refused before any server is bought, never after.
        The network is read once per cache period."""
        ip_range = config.get("subnet_ip_range")
        if not ip_range:
            return
        network_id = await self._ref_id("networks", config["networks"][0], "networks[0]")
        cached = self._subnets.get(network_id)
        if cached is None or time.monotonic() - cached[0] >= self.settings.cache_ttl_s:
            network = await self._call(lambda c: c.networks.get_by_id(network_id), RequestKind.POLL)
            cached = (time.monotonic(), {str(sn.ip_range) for sn in network.subnets or []})
            self._subnets[network_id] = cached
        if str(ip_range) not in cached[1]:
            raise ApplicationError(
                f"pool config subnet_ip_range {ip_range!r} is no subnet of network {network_id} "
                f"(its subnets: {', '.join(sorted(cached[1])) or 'none'})",
                type="HetznerInvalidConfig",
                non_retryable=True,
            )

    async def _attach_and_start(self, server: BoundServer, config: dict[str, Any]) -> None:
        """A pool with `subnet_ip_range` creates its servers off: attach the network in that
        subnet, then power on (Cluster Autoscaler's createServer). Each step is skipped when
        done, so a retried activity finishes what an earlier try began."""
        ip_range = config.get("subnet_ip_range")
        if not ip_range:
            return
        network_id = await self._ref_id("networks", config["networks"][0], "networks[0]")
        attached = {int(n.network.id) for n in (server.private_net or [])}
        sid = int(server.id)

        def run(client: Client) -> None:
            if network_id not in attached:
                try:
                    client.servers.attach_to_network(Server(id=sid), Network(id=network_id), ip_range=str(ip_range))
                except APIException as exc:
                    if exc.code != "server_already_attached":
                        raise
            if server.status in (None, "off"):
                client.servers.power_on(Server(id=sid))

        try:
            await self._call(run)
        except APIException as exc:
            if decide_error(exc.code) is ErrorDecision.RETRY:  # locked: the attach is still running
                raise ApplicationError(
                    f"Hetzner API error {exc.code} finishing server {sid}: {exc.message}", type="HetznerUnavailable"
                ) from exc
            raise ApplicationError(
                f"pool config subnet_ip_range {ip_range!r}: Hetzner refused the attach ({exc.code}): {exc.message}",
                type="HetznerInvalidRequest",
                non_retryable=True,
            ) from exc

    def _spread_group(self, client: Client, inp: CreateNodeInput) -> int:
        """A spread group of this pool with room, created when all are full; its seat is taken
        here (given back by `_spread_done` if the create fails)."""
        key = f"{inp.cluster}/{inp.pool.name}"
        cluster, pool = label_value(inp.cluster), label_value(inp.pool.name)
        with self._groups_lock:
            members = self._groups.get(key)
            if members is None:
                groups = client.placement_groups.get_all(
                    label_selector=f"{LABEL_CLUSTER}={cluster},{LABEL_POOL}={pool}"
                )
                members = {int(g.id): len(g.servers or []) for g in groups if g.type == "spread"}
                self._groups[key] = members
            gid = pick_placement_group(members)
            if gid is None:
                index = len(members)
                while True:  # another worker may have taken the next name: take the one after
                    try:
                        created = client.placement_groups.create(
                            name=placement_group_name(
                                _hostname_part(inp.cluster), _hostname_part(inp.pool.name), index
                            ),
                            type="spread",
                            labels={LABEL_CLUSTER: cluster, LABEL_POOL: pool},
                        )
                        break
                    except APIException as exc:
                        if exc.code != "uniqueness_error":
                            raise
                        index += 1
                gid = int(created.placement_group.id)
                members[gid] = 0
            members[gid] += 1
            return gid

    def _spread_done(self, inp: CreateNodeInput, gid: int, created: bool, full: bool = False) -> None:
        with self._groups_lock:
            members = self._groups.get(f"{inp.cluster}/{inp.pool.name}")
            if members is None or gid not in members:
                return
            if full:
                members[gid] = SPREAD_GROUP_MAX  # another worker filled it
            elif not created:
                members[gid] -= 1

    async def create_node(self, inp: CreateNodeInput) -> CreateNodeResult:
        """Create one server for (request_id, attempt), or return the one an earlier try made.

        Locations are tried in order; capacity errors move on, the last one yields
        `no_capacity`. Quota → `quota_exceeded`. Rate limit → retryable with the reset delay.
        """
        type_name = inp.pool.server_type.lower()
        config = inp.pool.config
        locations = self._locations_for(config)
        labels = server_labels(inp)
        name = server_name(inp)

        # Idempotency: a retried activity must find the machine its earlier try made, so a retry
        # looks first. A first try goes straight to the create (one request, not two): the name
        # is derived from (request, attempt), so a create made before is refused as
        # `uniqueness_error` and recovered below.
        if not (activity.in_activity() and activity.info().attempt == 1):
            existing = await self._call(lambda c: self._find(c, labels), RequestKind.POLL)
            if existing is not None:
                await self._attach_and_start(existing, config)
                return self._created(existing, "found existing server for this request attempt")

        try:
            cat = await self._get_catalogue()
        except (APIException, requests.RequestException):
            cat = None  # the create itself will tell if the type is gone
        st: ServerType | None = None
        if cat is not None:
            reason = unusable_reason(
                cat.types.get(type_name), locations, datetime.now(UTC), self.settings.allow_deprecated
            )
            if reason is not None:
                return CreateNodeResult(outcome="no_capacity", message=f"server type {type_name}: {reason}")
            st = server_type_from_api(cat.types[type_name], locations, self.settings.system_reserve)

        join_token, join_endpoint, ca_hash = self._join_secrets()

        def user_data(location: str) -> str:  # the node registers labelled with its location
            return render_user_data(
                cluster=inp.cluster,
                node_name=name,
                join_endpoint=join_endpoint,
                join_token=join_token,
                ca_cert_hash=ca_hash,
                labels=self._node_labels(inp, st, location),
                taints=inp.taints,
            )

        in_subnet = bool(config.get("subnet_ip_range"))
        await self._check_subnet(config)
        kwargs: dict[str, Any] = {
            "name": name,
            "server_type": HServerType(name=type_name),
            "image": await self._image(config, st.arch if st is not None else "amd64"),
            # The pool's server_labels (Cluster Autoscaler's serverLabels), growth's own on top.
            "labels": {**(config.get("server_labels") or {}), **labels},
            # In a subnet: created off, attached, then started (_attach_and_start).
            "start_after_create": not in_subnet,
        }
        if config.get("ssh_keys"):
            kwargs["ssh_keys"] = [
                SSHKey(id=int(k)) if str(k).isdigit() else SSHKey(name=str(k)) for k in config["ssh_keys"]
            ]
        if config.get("networks") and not in_subnet:
            kwargs["networks"] = [
                Network(id=await self._ref_id("networks", n, f"networks[{i}]"))
                for i, n in enumerate(config["networks"])
            ]
        if config.get("firewalls"):
            ids = [await self._ref_id("firewalls", f, f"firewalls[{i}]") for i, f in enumerate(config["firewalls"])]
            # The cluster's and the pool's firewalls, deduplicated by id (as Cluster Autoscaler merges them).
            kwargs["firewalls"] = [Firewall(id=i) for i in dict.fromkeys(ids)]
        if config.get("public_ipv4") is False or config.get("public_ipv6") is False:
            kwargs["public_net"] = ServerCreatePublicNetwork(
                enable_ipv4=config.get("public_ipv4") is not False, enable_ipv6=config.get("public_ipv6") is not False
            )
        spread = wants_spread(config)
        if config.get("placement_group") is not None and not spread:
            kwargs["placement_group"] = PlacementGroup(
                id=await self._ref_id("placement_groups", config["placement_group"], "placement_group")
            )

        misses: list[str] = []
        for location in locations:
            seen = self._no_capacity.get((type_name, location))
            if seen is not None and time.monotonic() - seen < self.settings.capacity_memory_s:
                misses.append(f"{location}: resource_unavailable {time.monotonic() - seen:.0f}s ago")
                continue
            gid: int | None = None
            if spread:
                gid = await self._call(lambda c: self._spread_group(c, inp))
                kwargs["placement_group"] = PlacementGroup(id=gid)
            created = False
            try:
                # Bounded as Cluster Autoscaler bounds it (HCLOUD_SERVER_CREATION_TIMEOUT); a create
                # still running past it is looked up by its labels below, never sent again.
                response = await asyncio.wait_for(
                    self._call(
                        lambda c, loc=location: c.servers.create(
                            location=Location(name=loc), user_data=user_data(loc), **kwargs
                        )
                    ),
                    self.settings.create_timeout_s,
                )
                created = True
                await self._attach_and_start(response.server, config)
                return self._created(response.server, f"created in {location}")
            except APIException as exc:
                if gid is not None:
                    self._spread_done(inp, gid, created=False, full=exc.code == "placement_error")
                    gid = None
                decision = decide_error(exc.code)
                if decision is ErrorDecision.NEXT_LOCATION:
                    if exc.code == "resource_unavailable":
                        self._no_capacity[(type_name, location)] = time.monotonic()
                    misses.append(f"{location}: {exc.code}")
                    continue
                if decision is ErrorDecision.QUOTA_EXCEEDED:
                    return CreateNodeResult(outcome="quota_exceeded", message=f"{exc.code}: {exc.message}")
                if decision is ErrorDecision.ALREADY_EXISTS:
                    # hcloud re-sent a create whose answer timed out, or an earlier try of this
                    # attempt created it: the first one took the name.
                    return await self._recover(labels, name, f"name taken ({exc.code})", config)
                if decision is ErrorDecision.RETRY:
                    raise ApplicationError(
                        f"Hetzner API error {exc.code}: {exc.message}", type="HetznerUnavailable"
                    ) from exc
                raise ApplicationError(
                    f"Hetzner refused the create ({exc.code}): {exc.message}",
                    type="HetznerInvalidRequest",
                    non_retryable=True,
                ) from exc
            except (requests.RequestException, TimeoutError) as exc:
                # The answer was lost or late: the server may exist. Look before anyone creates again.
                created = True  # keep the group seat: the server may hold it
                return await self._recover(labels, name, f"create response lost ({type(exc).__name__})", config)
            finally:
                if gid is not None and not created:
                    self._spread_done(inp, gid, created=False)
        return CreateNodeResult(
            outcome="no_capacity",
            message=f"no capacity for {type_name} in {', '.join(locations)}: {'; '.join(misses)}",
        )

    async def _recover(
        self, labels: dict[str, str], name: str, why: str, config: dict[str, Any] | None = None
    ) -> CreateNodeResult:
        def look(client: Client) -> BoundServer | None:
            found = self._find(client, labels)
            if found is None:
                by_name = client.servers.get_by_name(name)
                if by_name is not None and by_name.labels.get(LABEL_REQUEST) == labels[LABEL_REQUEST]:
                    found = by_name
            return found

        try:
            server = await self._call(look, RequestKind.POLL)
        except requests.RequestException as exc:
            raise ApplicationError(f"{why}; lookup failed too: {exc}", type="HetznerTransportError") from exc
        if server is not None:
            await self._attach_and_start(server, config or {})
            return self._created(server, f"{why}; found the server it created")
        raise ApplicationError(f"{why}; no server found yet, retrying", type="HetznerTransportError")

    # ------------------------------------------------------------------ delete / list

    async def delete_node(self, inp: DeleteNodeInput) -> None:
        """Delete by provider id (or by name, only if the server carries this cluster's label).
        A server already gone is success."""
        server_id: int | None = None
        if inp.provider_id.startswith(PROVIDER_ID_PREFIX):
            tail = inp.provider_id[len(PROVIDER_ID_PREFIX) :]
            if tail.isdigit():
                server_id = int(tail)

        def delete(client: Client) -> None:
            sid = server_id
            if sid is None:
                found = client.servers.get_by_name(inp.node_name)
                if found is None or found.labels.get(LABEL_CLUSTER) != label_value(inp.cluster):
                    return  # gone, or not ours to delete
                sid = int(found.id)
            try:
                client.servers.delete(Server(id=sid))
            except APIException as exc:
                if exc.code != "not_found":
                    raise

        try:
            await self._call(delete, RequestKind.DELETE)
        except APIException as exc:
            if decide_error(exc.code) is ErrorDecision.RETRY:
                raise ApplicationError(
                    f"Hetzner API error {exc.code}: {exc.message}", type="HetznerUnavailable"
                ) from exc
            raise
        except requests.RequestException as exc:
            raise ApplicationError(f"delete failed: {exc}", type="HetznerTransportError") from exc

    async def list_machines(self, cluster: str) -> list[ProviderMachine]:
        selector = f"{LABEL_CLUSTER}={label_value(cluster)}"
        # One paged list (50 a page) for every machine of the cluster, never a GET per server.
        servers = await self._call(lambda c: c.servers.get_all(label_selector=selector), RequestKind.LIST)
        return [
            ProviderMachine(
                provider=self.name,
                provider_id=f"{PROVIDER_ID_PREFIX}{s.id}",
                name=str(s.name),
                labels=dict(s.labels or {}),
                created_at=s.created.timestamp() if s.created else None,
            )
            for s in servers
        ]

    async def servers_not_running(self, cluster: str) -> set[str]:
        """Provider ids of the cluster's servers still booting: one paged list filtered by status
        (a poll costs one request while fewer than 50 boot, never a GET per server). For tools
        that wait on the cloud rather than on Nodes, such as the budget bench."""
        selector = f"{LABEL_CLUSTER}={label_value(cluster)}"
        servers = await self._call(
            lambda c: c.servers.get_all(label_selector=selector, status=["initializing", "starting"]),
            RequestKind.POLL,
        )
        return {f"{PROVIDER_ID_PREFIX}{s.id}" for s in servers}
