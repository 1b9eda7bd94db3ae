"""Hetzner Cloud facts turned into growth's terms: server types → ServerType, API error codes →
what a NodeRequest should do next. Pure: plain dicts in the API's JSON shape, no client."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel

from scaling.kube.models import LABEL_REGION, Resources
from scaling.nodes.models import ServerType

PROVIDER = "hetzner"
GIB = 1024**3


class ErrorDecision(str, Enum):
    NEXT_LOCATION = "next_location"  # this location has no room: try the next, then no_capacity
    QUOTA_EXCEEDED = "quota_exceeded"  # project limit: no location will help
    RATE_LIMITED = "rate_limited"  # retry after the rate limit resets
    INVALID_TOKEN = "invalid_token"  # retrying cannot help; an operator must fix the token
    FORBIDDEN = "forbidden"  # token lacks permission (read-only token)
    ALREADY_EXISTS = "already_exists"  # name taken: an earlier try of this request created it
    RETRY = "retry"  # transient provider trouble: retry the activity
    INVALID_REQUEST = "invalid_request"  # bad pool config (image, network...): do not retry


_DECISIONS: dict[str, ErrorDecision] = {
    "resource_unavailable": ErrorDecision.NEXT_LOCATION,
    "placement_error": ErrorDecision.NEXT_LOCATION,
    "unavailable": ErrorDecision.NEXT_LOCATION,
    "resource_limit_exceeded": ErrorDecision.QUOTA_EXCEEDED,
    "rate_limit_exceeded": ErrorDecision.RATE_LIMITED,
    "unauthorized": ErrorDecision.INVALID_TOKEN,
    "forbidden": ErrorDecision.FORBIDDEN,
    "token_readonly": ErrorDecision.FORBIDDEN,
    "uniqueness_error": ErrorDecision.ALREADY_EXISTS,
    "conflict": ErrorDecision.RETRY,
    "locked": ErrorDecision.RETRY,
    "service_error": ErrorDecision.RETRY,
    "server_error": ErrorDecision.RETRY,
    "maintenance": ErrorDecision.RETRY,
    "timeout": ErrorDecision.RETRY,
    "bad_gateway": ErrorDecision.RETRY,
}


def decide_error(code: str | int) -> ErrorDecision:
    """What to do about an API error. hcloud reports an int code (HTTP status) when the body
    held no error object."""
    if isinstance(code, int):
        if code == 401:
            return ErrorDecision.INVALID_TOKEN
        if code == 403:
            return ErrorDecision.FORBIDDEN
        if code == 429:
            return ErrorDecision.RATE_LIMITED
        if code >= 500:
            return ErrorDecision.RETRY
        return ErrorDecision.INVALID_REQUEST
    return _DECISIONS.get(code, ErrorDecision.INVALID_REQUEST)


def _parse_time(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = str(value).replace("Z", "+00:00")
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _arch(data: dict[str, Any]) -> str:
    return "arm64" if data.get("architecture") == "arm" else "amd64"


def hourly_price(data: dict[str, Any], locations: list[str]) -> float | None:
    """Net hourly price in the first of `locations` that prices this type (None if none do)."""
    by_location = {p.get("location"): p for p in data.get("prices") or []}
    for loc in locations:
        price = by_location.get(loc)
        if price is not None:
            return float(price["price_hourly"]["net"])
    return None


def server_type_from_api(
    data: dict[str, Any], locations: list[str], reserve: Resources, max_pods: int = 110
) -> ServerType:
    """ServerType of one `server_types[]` entry; allocatable = capacity − reserve (never < 0)."""
    capacity = Resources(
        cpu_m=int(data["cores"]) * 1000,
        memory=int(round(float(data["memory"]) * GIB)),
        pods=max_pods,
    )
    alloc = capacity - reserve
    price = hourly_price(data, locations)
    return ServerType(
        provider=PROVIDER,
        name=str(data["name"]).lower(),
        allocatable=Resources(
            cpu_m=max(alloc.cpu_m, 0), memory=max(alloc.memory, 0), pods=max(alloc.pods, 0), extended=_disk(data)
        ),
        price_hourly=price if price is not None else 0.0,
        arch=_arch(data),  # type: ignore[arg-type]
        deprecated=deprecation_of(data, locations) is not None,
    )


def _disk(data: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """The local disk (GB, as the API gives it) as the node's ephemeral-storage; Hetzner Cloud
    types offer no extended resources."""
    disk = data.get("disk")
    return (("ephemeral-storage", int(disk) * 10**9),) if isinstance(disk, (int, float)) and disk > 0 else ()


def deprecation_of(data: dict[str, Any], locations: list[str]) -> dict[str, Any] | None:
    """The deprecation that applies in the configured locations, or None.

    Hetzner moved deprecation into `locations[]`; the type-level field is the fallback. A type
    counts as deprecated only if it is deprecated in every configured location it is offered in.
    """
    per_location = {entry.get("name"): entry for entry in data.get("locations") or [] if entry.get("name")}
    offered = [per_location[loc] for loc in locations if loc in per_location]
    if offered:
        deps = [entry.get("deprecation") for entry in offered]
        if all(d is not None for d in deps):
            return deps[0]
        return None
    return data.get("deprecation")


def unusable_reason(
    data: dict[str, Any] | None,
    locations: list[str],
    now: datetime,
    allow_deprecated: bool = False,
) -> str | None:
    """Why a pool of this server type cannot get machines, or None if it can."""
    if data is None:
        return "not offered by the Hetzner API (removed or misspelt)"
    per_location = {entry.get("name"): entry for entry in data.get("locations") or [] if entry.get("name")}
    if per_location and not any(loc in per_location for loc in locations):
        return f"not offered in configured locations {', '.join(locations)}"
    if per_location and all(per_location[loc].get("available") is False for loc in locations if loc in per_location):
        return f"not available in configured locations {', '.join(locations)}"
    dep = deprecation_of(data, locations)
    if dep is not None:
        after = _parse_time(dep.get("unavailable_after"))
        if after is not None and after <= now:
            return f"deprecated and unavailable since {after.isoformat()}"
        if not allow_deprecated:
            when = f" (unavailable after {after.isoformat()})" if after else ""
            return f"deprecated{when}"
    if hourly_price(data, locations) is None and data.get("prices"):
        return f"not priced in configured locations {', '.join(locations)}"
    return None


def pool_locations(config: dict[str, Any]) -> list[str]:
    """The locations a pool's config names (`locations` or `location`); [] = the worker's default."""
    locs = config.get("locations") or config.get("location") or []
    return [locs] if isinstance(locs, str) else [str(x) for x in locs]


def topology_labels(location: str) -> dict[str, str]:
    """The topology labels of a node in `location`, as hcloud-cloud-controller-manager sets
    them: region = the location (fsn1). Its zone is the datacenter (fsn1-dc14), which only the
    created server knows, so growth leaves the zone label to the cloud controller manager."""
    return {LABEL_REGION: location}


SPREAD_GROUP_MAX = 10  # servers one spread placement group holds (Hetzner's documented limit)
_SELECTOR_MARKS = ("=", "!", "(", ",", " in ", " notin ")


class ImageRef(BaseModel):
    """A pool's image for one architecture: an id, a name (Hetzner resolves a name for the
    server type's architecture itself) or a label selector over snapshots (newest wins)."""

    kind: Literal["id", "name", "selector"]
    value: str


def image_ref(config: dict[str, Any], default: str, arch: str) -> ImageRef:
    """The image a pool's server of `arch` (amd64/arm64) boots: `images_for_arch[arch]` (Cluster
    Autoscaler's imagesForArch keys), else `image`, else the worker's default. As Cluster
    Autoscaler reads HCLOUD_IMAGE: digits are an id, a value with selector syntax (`=`, `!=`,
    `in (...)`, `!key`, commas) is a label selector, anything else a name."""
    per_arch = config.get("images_for_arch") or {}
    value = str(per_arch.get(arch) or config.get("image") or default).strip()
    if value.isdigit():
        return ImageRef(kind="id", value=value)
    if any(mark in value for mark in _SELECTOR_MARKS):
        return ImageRef(kind="selector", value=value)
    return ImageRef(kind="name", value=value)


def hetzner_architecture(arch: str) -> str:
    """Kubernetes arch (amd64/arm64) → Hetzner's (x86/arm)."""
    return "arm" if arch == "arm64" else "x86"


def wants_spread(config: dict[str, Any]) -> bool:
    """A pool asks for spread placement without naming a group: `placement_group: spread`."""
    return str(config.get("placement_group", "")).strip().lower() == "spread"


def placement_group_name(cluster: str, pool: str, index: int) -> str:
    """The n-th spread group growth creates for a pool (names are unique per project)."""
    return f"{cluster}-{pool}-spread-{index}"


def pick_placement_group(members: dict[int, int]) -> int | None:
    """The fullest spread group with room (filling groups keeps their number low), or None when
    every group holds SPREAD_GROUP_MAX servers and a new one is needed."""
    open_groups = [(count, gid) for gid, count in members.items() if count < SPREAD_GROUP_MAX]
    if not open_groups:
        return None
    return max(open_groups)[1]


def config_problem(config: dict[str, Any]) -> tuple[str, str] | None:
    """(field under `config`, reason) for a Hetzner pool config growth cannot use, or None."""
    per_arch = config.get("images_for_arch")
    if per_arch is not None:
        if not isinstance(per_arch, dict):
            return "images_for_arch", f"must be a mapping of amd64/arm64 to an image, got {type(per_arch).__name__}"
        for arch, image in per_arch.items():
            if arch not in ("amd64", "arm64"):
                return f"images_for_arch.{arch}", "architecture must be amd64 or arm64"
            if not isinstance(image, (str, int)) or not str(image).strip():
                return f"images_for_arch.{arch}", f"must be an image name, id or label selector, got {image!r}"
    group = config.get("placement_group")
    if group is not None and not wants_spread(config) and not str(group).isdigit():
        return "placement_group", f"must be a placement group id or 'spread', got {group!r}"
    return None
