"""Server-type catalogue: what a machine keeps back for the system, and lookups by name.

Names are lower case; lookups lower-case the name a user wrote ("CX31" and "cx31" are the same
type). The KWOK provider's bundled table is in scaling.nodes.providers.kwok.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from scaling.kube.models import Resources
from scaling.nodes.models import ServerType

GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class Reserve:
    """What the kubelet and system keep back from a machine.

    tiered=True applies the GKE-style sliding scale (a larger share of a small machine);
    cpu_m/memory add fixed amounts on top; eviction_memory is the hard eviction threshold.
    """

    tiered: bool = True
    cpu_m: int = 0
    memory: int = 0
    eviction_memory: int = 100 * MIB
    max_pods: int = 110


DEFAULT_RESERVE = Reserve()

# Sliding scales: (upper bound of the band, share reserved within the band).
_CPU_BANDS = ((1000, 0.06), (2000, 0.01), (4000, 0.005), (None, 0.0025))
_MEM_BANDS = ((4 * GIB, 0.25), (8 * GIB, 0.20), (16 * GIB, 0.10), (128 * GIB, 0.06), (None, 0.02))


def _banded(total: int, bands: tuple[tuple[int | None, float], ...]) -> int:
    reserved = 0.0
    lower = 0
    for upper, share in bands:
        top = total if upper is None else min(total, upper)
        if top > lower:
            reserved += (top - lower) * share
        if upper is None or total <= upper:
            break
        lower = upper
    return int(round(reserved))


def allocatable_after_reserve(cores: int, memory_bytes: int, reserve: Reserve = DEFAULT_RESERVE) -> Resources:
    """What pods may request on a machine of `cores` and `memory_bytes`."""
    cpu = cores * 1000
    cpu_res = reserve.cpu_m + (_banded(cpu, _CPU_BANDS) if reserve.tiered else 0)
    mem_res = reserve.memory + reserve.eviction_memory + (_banded(memory_bytes, _MEM_BANDS) if reserve.tiered else 0)
    return Resources(cpu_m=max(cpu - cpu_res, 0), memory=max(memory_bytes - mem_res, 0), pods=reserve.max_pods)


def catalogue_index(types: Iterable[ServerType]) -> dict[tuple[str, str], ServerType]:
    """(provider, lower-cased name) -> type; later entries win on duplicates."""
    return {(t.provider, t.name.lower()): t for t in types}


def price_key(provider: str, name: str) -> str:
    return f"{provider}/{name.lower()}"


def hourly_prices(types: Iterable[ServerType]) -> dict[str, float]:
    """The catalogue's hourly prices by price_key: what the scale-down evaluation reads of it (bounded by
    the catalogue's size, never the cluster's)."""
    return {price_key(t.provider, t.name): t.price_hourly for t in types}


def lookup(catalogue: dict[tuple[str, str], ServerType], provider: str, name: str) -> ServerType | None:
    return catalogue.get((provider, name.lower()))


# How long a loop plans with the catalogue it fetched (types and prices change on the provider's
# time scale, a burst's loops come seconds apart): within a run, a loop fetches it again only
# after this, or when its groups name other providers.
CATALOGUE_KEPT_S = 300.0


@dataclass
class KeptCatalogue:
    """The last catalogue a loop fetched: when (epoch seconds) and for which providers."""

    types: list[ServerType] = field(default_factory=list)
    fetched_at: float | None = None
    providers: list[str] = field(default_factory=list)


def catalogue_still_fresh(kept: KeptCatalogue, providers: list[str], now: float) -> bool:
    """Whether a loop may plan with `kept` instead of fetching the catalogue again: fetched for
    the same providers less than CATALOGUE_KEPT_S ago, and not empty (an empty one is what a
    provider the worker lacks gives, so ask again)."""
    return (
        bool(kept.types)
        and kept.fetched_at is not None
        and kept.providers == providers
        and now - kept.fetched_at < CATALOGUE_KEPT_S
    )
