"""Resources as the planner's tuples, and how many pods fit in some room."""

from scaling.kube.models import Resources, fit_count, vec


def test_vec_is_cpu_memory_and_pod_slots() -> None:
    assert vec(Resources(cpu_m=250, memory=2**30, pods=3)) == (250, 2**30, 3)


def test_fit_count_takes_the_tightest_dimension_the_pod_needs() -> None:
    assert fit_count((100, 2**30, 1), (450, 3 * 2**30, 110)) == 3
    assert fit_count((100, 0, 1), (450, 0, 2)) == 2  # no memory asked: none needed


def test_negative_room_holds_no_pods_never_a_negative_count() -> None:
    # Demand and planning take the count from the pods left; the packer only ever asks "> 0".
    # A node its DaemonSets overfill (negative room) must hold 0, never give pods back.
    assert fit_count((100, 1, 1), (350, -5, 10)) == 0
    assert fit_count((100, 0, 1), (-1, 0, 10)) == 0
    # A dimension the pod does not ask for does not count, even overdrawn.
    assert fit_count((100, 0, 1), (350, -5, 10)) == 3


def test_a_request_of_all_zeros_counts_zero() -> None:
    assert fit_count((0, 0, 0), (1000, 2**30, 110)) == 0
