"""The KWOK provider's bundled server-type table.

The KWOK provider fakes machines, so its catalogue borrows Hetzner Cloud's shapes and list
prices (EUR per hour, rounded) so plans look like real ones. Names are lower case.
"""

from __future__ import annotations

from scaling.nodes.catalogue import DEFAULT_RESERVE, GIB, Reserve, allocatable_after_reserve
from scaling.nodes.models import ServerType

# (name, cores, memory GiB, EUR/hour, arch, deprecated); the disk (ephemeral-storage) is
# Hetzner's for the shape, in GB (DISK_GB)
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


DISK_GB = {
    "cx22": 40, "cx32": 80, "cx42": 160, "cx52": 320, "cx31": 80, "cx33": 80,
    "cx11": 20, "cx21": 40, "cx41": 160, "cx51": 240,
    "cpx11": 40, "cpx21": 80, "cpx31": 160, "cpx41": 240, "cpx51": 360,
    "cax11": 40, "cax21": 80, "cax31": 160, "cax41": 320,
    "ccx13": 80, "ccx23": 160, "ccx33": 240, "ccx43": 360, "ccx53": 600,
}  # fmt: skip

GPU = "nvidia.com/gpu"
# A GPU family that has no Hetzner Cloud twin, so GPU pods can be planned and tested:
# (name, cores, memory GiB, EUR/hour, GPUs, disk GB).
_KWOK_GPU_TABLE: tuple[tuple[str, int, int, float, int, int], ...] = (
    ("gpu1", 8, 32, 0.30, 1, 240),
    ("gpu4", 32, 128, 1.10, 4, 960),
)


def kwok_catalogue(provider: str = "kwok", reserve: Reserve = DEFAULT_RESERVE) -> list[ServerType]:
    out = []
    for name, cores, mem_gib, price, arch, deprecated in _KWOK_TABLE:
        alloc = allocatable_after_reserve(cores, mem_gib * GIB, reserve)
        out.append(
            ServerType(
                provider=provider,
                name=name,
                allocatable=alloc.model_copy(update={"extended": _storage(name)}),
                price_hourly=price,
                arch=arch,  # type: ignore[arg-type]
                deprecated=deprecated,
            )
        )
    for name, cores, mem_gib, price, gpus, disk in _KWOK_GPU_TABLE:
        alloc = allocatable_after_reserve(cores, mem_gib * GIB, reserve)
        extended = tuple(sorted({GPU: gpus, "ephemeral-storage": disk * 10**9}.items()))
        out.append(
            ServerType(
                provider=provider,
                name=name,
                allocatable=alloc.model_copy(update={"extended": extended}),
                price_hourly=price,
            )
        )
    return out


def _storage(name: str) -> tuple[tuple[str, int], ...]:
    return (("ephemeral-storage", DISK_GB[name] * 10**9),) if name in DISK_GB else ()
