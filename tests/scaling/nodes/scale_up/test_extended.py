"""Shapes asking for one extended resource share a planned node only where together they
cannot ask for more than it has (scaling.nodes.scale_up.extended)."""

from itertools import product

from hypothesis import example, given, settings
from hypothesis import strategies as st

from scaling.nodes.scale_up.extended import may_overflow

CX22 = (1800, 3500, 110)


def test_two_gpu_workloads_overflow_a_one_gpu_node() -> None:
    gpu = ((250, 1 << 30, 1), 1, 1)
    assert may_overflow([gpu, gpu], (7800, 30 << 30, 110), 1)
    assert not may_overflow([gpu, gpu], (7800, 30 << 30, 110), 4)


def test_workloads_asking_a_gigabyte_of_disk_never_fill_a_cx22s_disk() -> None:
    disk = [((200 + 10 * i, 256, 1), 100, 1 << 30) for i in range(5)]
    assert not may_overflow(disk, CX22, 40 * 10**9)
    # Half the disk each, and small enough that three fit the cpu: they could.
    assert may_overflow([((200, 256, 1), 100, 20 * 10**9)] * 2, CX22, 40 * 10**9)


def test_pods_that_ask_nothing_the_node_counts_all_go() -> None:
    assert may_overflow([((0, 0, 0), 3, 2), ((100, 0, 0), 1, 1)], CX22, 6)
    assert not may_overflow([((0, 0, 0), 3, 2), ((100, 0, 0), 1, 1)], CX22, 7)


SMALL = (1000, 1000, 4)
asker = st.tuples(
    st.tuples(st.integers(0, 700), st.integers(0, 700), st.integers(0, 2)), st.integers(0, 4), st.integers(0, 5)
)


@settings(max_examples=400, derandomize=True)
# The greedy's best ratio leaves room that two of a lower ratio fill better: the part of a pod
# the relaxation counts is what keeps the bound above 8.
@example([((600, 600, 2), 1, 6), ((500, 500, 2), 1, 4), ((500, 500, 2), 1, 4)], 7)
@given(st.lists(asker, min_size=1, max_size=3), st.integers(0, 20))
def test_never_says_safe_when_some_node_asks_for_more(askers: list, have: int) -> None:
    """Brute force over every node the askers' pods could make: if one asks for more than
    `have`, the bound says so."""
    worst = 0
    for counts in product(*(range(cap + 1) for _, cap, _ in askers)):
        used = [sum(n * req[d] for n, (req, _, _) in zip(counts, askers, strict=True)) for d in range(3)]
        if all(u <= c for u, c in zip(used, SMALL, strict=True)):
            worst = max(worst, sum(n * a for n, (_, _, a) in zip(counts, askers, strict=True)))
    if worst > have:
        assert may_overflow(askers, SMALL, have)
