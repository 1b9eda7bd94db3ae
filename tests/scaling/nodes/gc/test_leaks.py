"""Leak detection: machines with no Node and no live NodeRequest, past the grace period."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scaling.kube.labels import is_label_value, label_value, request_key
from scaling.nodes.contracts import ProviderMachine
from scaling.nodes.gc.leaks import find_leaked_machines
from scaling.nodes.models import LABEL_REQUEST
from scaling.nodes.scale_up.requests import member_id


def machine(pid: str, request: str | None, created: float | None) -> ProviderMachine:
    labels = {LABEL_REQUEST: request} if request is not None else {}
    return ProviderMachine(provider="hetzner", provider_id=pid, name=pid, labels=labels, created_at=created)


def test_decisions() -> None:
    machines = [
        machine("young", request_key("nodes/c/request/gone"), 950.0),
        machine("has-node", request_key("nodes/c/request/gone"), 0.0),
        machine("live-keyed", request_key("nodes/c/request/live"), 0.0),
        machine("live-raw", "r-live", 0.0),
        machine("orphan", request_key("nodes/c/request/gone"), 0.0),
        machine("unlabelled", None, 0.0),
        machine("unknown-age", None, None),
    ]
    leaked = find_leaked_machines(
        machines,
        live_request_ids={"nodes/c/request/live", "r-live"},
        node_provider_ids={"has-node"},
        now=1000.0,
        grace_s=300.0,
    )
    assert [m.provider_id for m in leaked] == ["orphan", "unlabelled"]


def test_a_batch_members_machine_is_live_while_that_member_is() -> None:
    """Each member labels its machine with its own id's key: one member in flight keeps only
    its own machine, not its finished neighbours' leaked ones."""
    batch = "nodes/c/request/000007-ab12"
    machines = [machine(f"m{i}", request_key(member_id(batch, i)), 0.0) for i in range(3)]
    assert len({m.labels[LABEL_REQUEST] for m in machines}) == 3
    leaked = find_leaked_machines(
        machines, live_request_ids={member_id(batch, 1)}, node_provider_ids={"m0"}, now=1000.0, grace_s=300.0
    )
    assert [m.provider_id for m in leaked] == ["m2"]


def test_grace_boundary() -> None:
    m = [machine("m", "r", 700.0)]
    assert find_leaked_machines(m, set(), set(), now=999.0, grace_s=300.0) == []
    assert find_leaked_machines(m, set(), set(), now=1000.0, grace_s=300.0) == m


@given(st.text(max_size=120))
def test_label_value_is_valid_and_stable(raw: str) -> None:
    value = label_value(raw)
    assert is_label_value(value)
    assert label_value(raw) == value
    if is_label_value(raw):
        assert value == raw


def test_label_value_keeps_distinct_ids_distinct() -> None:
    assert request_key("nodes/a/request/1") != request_key("nodes.a.request.1")
    assert request_key("nodes/a/request/1").startswith("nodes-a-request-1-")
    assert len(request_key("x" * 200)) <= 63
