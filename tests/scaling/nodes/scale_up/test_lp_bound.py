import itertools
import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import plan_scale_up
from bench.lp import lp_lower_bound
from bench.plan_scale_up import BASELINES, run
from bench.workload import FAMILIES


def brute_force(caps, prices, demand, step=Fraction(1, 4), top=12):
    """Cheapest covering mix on a grid: an upper bound that the LP optimum must not exceed."""
    best = None
    grid = [step * k for k in range(int(top / step) + 1)]
    for xs in itertools.product(grid, repeat=len(caps)):
        if all(sum(x * c[r] for x, c in zip(xs, caps)) >= demand[r] for r in range(3)):
            cost = sum(x * p for x, p in zip(xs, prices))
            best = cost if best is None or cost < best else best
    return best


def test_lp_mixes_types_when_demand_is_unbalanced() -> None:
    caps = [[Fraction(4), Fraction(4), Fraction(100)], [Fraction(1), Fraction(8), Fraction(100)]]
    prices = [Fraction(1), Fraction(1)]
    # 4 cpu + 8 mem: one of each covers exactly, cost 2; neither alone does it as cheaply.
    sol = lp_lower_bound(caps, prices, [Fraction(5), Fraction(12), Fraction(2)])
    assert sol.cost == 2
    assert all(d >= 0 for d in sol.duals)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6), st.integers(1, 9)),
        min_size=1,
        max_size=2,
    ),
    st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(0, 8)),
)
def test_lp_bound_is_dual_feasible_and_below_a_grid_search(types, demand) -> None:
    caps = [[Fraction(a), Fraction(b), Fraction(c)] for a, b, c, _ in types]
    prices = [Fraction(p) for *_, p in types]
    d = [Fraction(x) for x in demand]
    sol = lp_lower_bound(caps, prices, d)
    grid = brute_force(caps, prices, d)
    assert sol.cost <= grid  # a lower bound ...
    # ... and attained: the dual value is feasible for every type (weak duality both ways).
    for c, p in zip(caps, prices):
        assert sum(ci * yi for ci, yi in zip(c, sol.duals)) <= p
    assert sol.cost == sum(di * yi for di, yi in zip(d, sol.duals))


def test_bench_small_size_is_complete_and_within_ten_percent() -> None:
    r = run(1000)
    assert r["pods"] == 1000 and r["nodes"] > 0
    assert 1.0 <= r["cost_ratio"] <= 1.10


def test_bench_module_prints_json_last_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `make bench`'s main at small sizes, in-process (a subprocess cost its imports again).
    for name, value in (("SIZES", (200,)), ("FAMILY_PODS", (80,)), ("AFFINITY_PODS", 200)):
        monkeypatch.setattr(plan_scale_up, name, value)
    plan_scale_up.main()
    out = capsys.readouterr().out.strip().splitlines()
    last = json.loads(out[-1])
    assert set(last) == {
        "pods", "plan_seconds", "plan_cpu_seconds", "load_average", "nodes", "cost", "cost_lower_bound",
        "cost_ratio", "families", "family_plan_cpu_seconds", "affinity",
    }  # fmt: skip
    assert set(last["family_plan_cpu_seconds"]) == set(FAMILIES)
    assert last["pods"] == 200 and last["cost_ratio"] >= 1.0
    # Every family is priced for growth and each baseline, all at or above the LP bound, and
    # growth is dearer than none of them.
    assert [f["family"] for f in last["families"]] == list(FAMILIES)
    for f in last["families"]:
        assert min(f[k] for k in ("growth", *BASELINES)) >= 1.0
        assert f["dearer_than"] == "" and all(f["growth"] <= f[k] for k in BASELINES)
