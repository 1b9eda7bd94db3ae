"""Orphans: a Node pointing at a machine the provider no longer has, or a machine without a
Node, reported once seen for longer than the grace period."""

from __future__ import annotations

from scaling.nodes.contracts import OrphanObservation
from scaling.nodes.gc.orphans import Orphan, mark_reported, orphans_from


def obs(nodes: dict[str, str], machines: list[tuple[str, str]], checked: list[str] = ["hetzner"]) -> OrphanObservation:  # noqa: B006
    return OrphanObservation(
        nodes=nodes,
        machines=[{"provider": "hetzner", "provider_id": pid, "name": name} for name, pid in machines],
        checked=checked,
    )


def test_both_kinds_are_found_and_matched_pairs_are_not() -> None:
    o = obs({"n-ok": "hcloud://1", "n-gone": "hcloud://2"}, [("s-ok", "hcloud://1"), ("s-lost", "hcloud://3")])
    found = {(x.kind, x.name) for x in orphans_from(o, [], now=100.0, grace_s=60)}
    assert found == {("NodeWithoutMachine", "n-gone"), ("MachineWithoutNode", "s-lost")}


def test_reported_only_after_the_grace_period_and_since_is_kept_across_checks() -> None:
    o = obs({"n-gone": "hcloud://2"}, [])
    first = mark_reported(orphans_from(o, [], now=100.0, grace_s=60), now=100.0, grace_s=60)
    assert [(x.since, x.reported) for x in first] == [(100.0, False)]  # a Node may lag its machine
    later = mark_reported(orphans_from(o, first, now=170.0, grace_s=60), now=170.0, grace_s=60)
    assert [(x.since, x.reported) for x in later] == [(100.0, True)]


def test_a_provider_that_could_not_be_listed_judges_no_node() -> None:
    o = obs({"n": "hcloud://2", "k": "kwok://k"}, [], checked=[])
    assert orphans_from(o, [], now=1.0, grace_s=0) == []


def test_an_orphan_that_resolves_is_dropped() -> None:
    before = [Orphan(kind="NodeWithoutMachine", name="n", provider="hetzner", provider_id="hcloud://2", since=1.0)]
    o = obs({"n": "hcloud://2"}, [("s", "hcloud://2")])
    assert orphans_from(o, before, now=500.0, grace_s=60) == []


def test_provider_id_schemes_name_growth_providers() -> None:
    from scaling.nodes.gc.orphans import provider_of

    assert provider_of("hcloud://123") == "hetzner"
    assert provider_of("kwok://n1") == "kwok"
    assert provider_of("") == ""


def test_a_search_leaves_out_nodes_being_removed_and_keeps_the_oldest_within_its_bound() -> None:
    from scaling.nodes.gc.orphans import MAX_ORPHANS, OrphanSearchInput, find_orphans

    o = obs({"n-going": "hcloud://2", "n-gone": "hcloud://3"}, [(f"s-{i:04d}", f"hcloud://x{i}") for i in range(500)])
    inp = OrphanSearchInput(cluster="c", providers=["hetzner"], now=100.0, grace_s=60, removing=["n-going"])
    first = find_orphans(o, inp)
    assert len(first) == MAX_ORPHANS and ("NodeWithoutMachine", "n-going") not in {(x.kind, x.name) for x in first}
    # The ones kept keep their timers; a machine seen for the first time waits behind them.
    later = find_orphans(o, inp.model_copy(update={"now": 170.0, "previous": first}))
    assert later == [x.model_copy(update={"reported": True}) for x in first]
