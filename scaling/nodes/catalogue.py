"""Server-type catalogue: the bundled table for the KWOK provider, and lookups by name.

The KWOK provider fakes machines, so its catalogue borrows Hetzner Cloud's shapes and list
prices (EUR per hour, rounded) so plans look like real ones. Names are lower case; lookups
lower-case the name a user wrote ("CX31" and "cx31" are the same type).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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

# (name, cores, memory GiB, EUR/hour, arch, deprecated)
_KWOK_TABLE: tuple[tuple[str, int, int, float, str, bool], ...] = (
    # shared vCPU, Intel, current generation
    ("cx22", 2, 4, 0.0060, "amd64", False),
    ("cx32", 4, 8, 0.0113, "amd64", False),
    ("cx42", 8, 16, 0.0273, "amd64", False),
    ("cx52", 16, 32, 0.0540, "amd64", False),
    # the seed's names: CX31 (older, memory-rich) and CX33 (newest, cheapest per core)
    ("cx31", 2, 8, 0.0127, "amd64", False),
    ("cx33", 4, 8, 0.0088, "amd64", False),
    # previous generation, kept so old specs parse, never chosen
    ("cx11", 1, 2, 0.0060, "amd64", True),
    ("cx21", 2, 4, 0.0095, "amd64", True),
    ("cx41", 4, 16, 0.0262, "amd64", True),
    ("cx51", 8, 32, 0.0509, "amd64", True),
    # shared vCPU, AMD
    ("cpx11", 2, 2, 0.0070, "amd64", False),
    ("cpx21", 3, 4, 0.0125, "amd64", False),
    ("cpx31", 4, 8, 0.0228, "amd64", False),
    ("cpx41", 8, 16, 0.0418, "amd64", False),
    ("cpx51", 16, 32, 0.0893, "amd64", False),
    # shared vCPU, Ampere (arm64)
    ("cax11", 2, 4, 0.0063, "arm64", False),
    ("cax21", 4, 8, 0.0113, "arm64", False),
    ("cax31", 8, 16, 0.0220, "arm64", False),
    ("cax41", 16, 32, 0.0432, "arm64", False),
    # dedicated vCPU
    ("ccx13", 2, 8, 0.0240, "amd64", False),
    ("ccx23", 4, 16, 0.0480, "amd64", False),
    ("ccx33", 8, 32, 0.0961, "amd64", False),
    ("ccx43", 16, 64, 0.1920, "amd64", False),
    ("ccx53", 32, 128, 0.3840, "amd64", False),
)

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


def kwok_catalogue(provider: str = "kwok", reserve: Reserve = DEFAULT_RESERVE) -> list[ServerType]:
    return [
        ServerType(
            provider=provider,
            name=name,
            allocatable=allocatable_after_reserve(cores, mem_gib * GIB, reserve),
            price_hourly=price,
            arch=arch,  # type: ignore[arg-type]
            deprecated=deprecated,
        )
        for name, cores, mem_gib, price, arch, deprecated in _KWOK_TABLE
    ]


def catalogue_index(types: Iterable[ServerType]) -> dict[tuple[str, str], ServerType]:
    """(provider, lower-cased name) -> type; later entries win on duplicates."""
    return {(t.provider, t.name.lower()): t for t in types}


def lookup(catalogue: dict[tuple[str, str], ServerType], provider: str, name: str) -> ServerType | None:
    return catalogue.get((provider, name.lower()))
