from scaling.nodes.catalogue import (
    CATALOGUE_KEPT_S,
    GIB,
    KeptCatalogue,
    Reserve,
    allocatable_after_reserve,
    catalogue_index,
    catalogue_still_fresh,
    lookup,
)
from scaling.nodes.providers.kwok import kwok_catalogue


def test_allocatable_is_below_capacity_and_grows_with_size() -> None:
    small = allocatable_after_reserve(2, 4 * GIB)
    big = allocatable_after_reserve(16, 32 * GIB)
    assert 0 < small.cpu_m < 2000 and 0 < small.memory < 4 * GIB
    assert big.cpu_m > small.cpu_m and big.memory > small.memory
    # the sliding scale keeps back a smaller share of a big machine
    assert (4 * GIB - small.memory) / (4 * GIB) > (32 * GIB - big.memory) / (32 * GIB)
    assert small.pods == 110


def test_fixed_reserve_without_tiers() -> None:
    r = allocatable_after_reserve(
        4, 8 * GIB, Reserve(tiered=False, cpu_m=100, memory=GIB, eviction_memory=0, max_pods=58)
    )
    assert (r.cpu_m, r.memory, r.pods) == (3900, 7 * GIB, 58)


def test_index_is_case_insensitive_by_lower_casing() -> None:
    idx = catalogue_index(kwok_catalogue("hetzner"))
    assert lookup(idx, "hetzner", "CX31") is idx[("hetzner", "cx31")]
    assert lookup(idx, "kwok", "cx31") is None


def test_a_fetched_catalogue_is_kept_for_its_providers_until_it_is_stale() -> None:
    types = kwok_catalogue()
    kept = KeptCatalogue(types, fetched_at=1000.0, providers=["kwok"])
    assert catalogue_still_fresh(kept, ["kwok"], 1000.0 + CATALOGUE_KEPT_S - 1)
    assert not catalogue_still_fresh(kept, ["kwok"], 1000.0 + CATALOGUE_KEPT_S)
    # A group that names another provider needs that provider's types: fetch again.
    assert not catalogue_still_fresh(kept, ["hetzner", "kwok"], 1001.0)
    # Nothing fetched yet, or an empty answer (a provider the worker lacks): ask again.
    assert not catalogue_still_fresh(KeptCatalogue(), ["kwok"], 1001.0)
    assert not catalogue_still_fresh(KeptCatalogue([], 1000.0, ["kwok"]), ["kwok"], 1001.0)
