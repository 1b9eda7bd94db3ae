"""Hypothesis strategies for fleet clusters and rules."""

from __future__ import annotations

from hypothesis import strategies as st

from scaling.fleet.capacity import TypeRules
from scaling.fleet.models import ClusterPhase, ClusterRecord

TYPES = ("standard", "developer")


@st.composite
def rules(draw: st.DrawFn, instance_type: str = "standard") -> TypeRules:
    biggest = draw(st.integers(1, 6))
    return TypeRules(
        instance_type=instance_type,
        limit=draw(st.none() | st.integers(0, 60)),
        slack=draw(st.integers(0, 12)),
        biggest_units=biggest,
        expected_units=draw(st.integers(biggest, 20)),
    )


@st.composite
def cluster(draw: st.DrawFn, idx: int) -> ClusterRecord:
    phase = draw(st.sampled_from(list(ClusterPhase)))
    reported = draw(st.booleans())
    max_units = draw(st.integers(0, 20)) if reported else None
    empty = draw(st.booleans())
    consumed = 0 if empty or phase != ClusterPhase.READY else draw(st.integers(1, max(1, max_units or 10)))
    return ClusterRecord(
        id=f"c{idx}",
        instance_type=draw(st.sampled_from(TYPES)),
        phase=phase,
        max_units=max_units,
        consumed_units=consumed,
        instances=0 if consumed == 0 else draw(st.integers(1, consumed)),
        deletion_blocked=draw(st.booleans()) and draw(st.booleans()),
    )


@st.composite
def clusters(draw: st.DrawFn, max_size: int = 8) -> list[ClusterRecord]:
    n = draw(st.integers(0, max_size))
    return [draw(cluster(i)) for i in range(n)]
