"""Billing-aware scale-down: a node paid per started hour is kept until shortly before its
paid period ends, untainted; protection and data safety still win."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from scaling.kube.drain import LOCAL_STORAGE, PROTECTED
from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.nodes.billing import BILLING_PERIOD, paid_until, removable_from
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, Billing, NodeGroup
from scaling.nodes.nodegroups import InvalidSpec, flatten_pools, parse_node_group
from scaling.nodes.scale_down.candidates import UNNEEDED_TIME, plan_scale_down
from scaling.nodes.scale_down.models import NodeState, ScaleDownLoopSettings

GI = 1024**3
CREATED = 1_000_000.0  # epoch seconds the node was created at
HOUR = 3600.0


def group(provider: str = "hetzner", billing: Any = None, **scale_down: Any) -> NodeGroup:
    pool: dict[str, Any] = {"provider": provider, "serverType": ["cx22"], "priority": 10}
    if billing is not None:
        pool["billing"] = billing
    spec: dict[str, Any] = {"pools": [pool]}
    if scale_down:
        spec["scaleDown"] = scale_down
    return parse_node_group({"metadata": {"name": "g"}, "spec": spec}, {"hetzner", "kwok"})


def node(name: str, provider: str = "hetzner", created: float = CREATED) -> NodeInfo:
    return NodeInfo(
        name=name,
        labels={LABEL_GROUP: "g", LABEL_POOL: f"{provider}-cx22"},
        allocatable=Resources(cpu_m=2000, memory=4 * GI, pods=110),
        ready=True,
        created_at=datetime.fromtimestamp(created, UTC),
    )


def pod(name: str, on: str, cpu: int = 100, **kw: Any) -> PodInfo:
    kw.setdefault("controller_kind", "ReplicaSet")
    return PodInfo(
        namespace="default",
        name=name,
        uid=name,
        node_name=on,
        phase="Running",
        requests=Resources(cpu_m=cpu, memory=128 * 1024**2, pods=1),
        **kw,
    )


BUSY = [pod("busy", "keep", cpu=1900)]  # keeps node "keep" utilized: it is the pods' target


def plan(nodes: list[NodeInfo], pods: list[PodInfo], g: NodeGroup, now: float, since: float | None = None, **kw: Any):
    since_map = {n.name: since for n in nodes} if since is not None else {}
    return plan_scale_down(
        nodes, pods, [], [g], None, now, since_map, None, set(kw.get("protected", ())), set(), ScaleDownLoopSettings()
    )


def test_paid_until_counts_started_periods() -> None:
    assert paid_until(CREATED, CREATED, HOUR) == CREATED + HOUR  # the first hour starts at creation
    assert paid_until(CREATED, CREATED + HOUR - 1, HOUR) == CREATED + HOUR
    assert paid_until(CREATED, CREATED + HOUR, HOUR) == CREATED + 2 * HOUR  # a second hour started
    b = Billing(period_s=HOUR, margin_s=300)
    assert removable_from(CREATED, CREATED + 1200, b) == CREATED + HOUR - 300
    assert removable_from(CREATED, CREATED + HOUR - 300, b) is None
    assert removable_from(CREATED, CREATED + HOUR + 60, b) == CREATED + 2 * HOUR - 300
    assert removable_from(None, CREATED, b) is None and removable_from(CREATED, CREATED, None) is None


def test_hetzner_pools_bill_per_started_hour_by_default_kwok_pools_do_not() -> None:
    assert flatten_pools(group())[0].billing == Billing(period_s=HOUR, margin_s=300)
    assert flatten_pools(group("kwok"))[0].billing is None
    assert flatten_pools(group(billing={"period": 0}))[0].billing is None
    assert flatten_pools(group(billing={"period": "0"}))[0].billing is None
    assert flatten_pools(group("kwok", billing={"period": "1h", "margin": "2m"}))[0].billing == Billing(
        period_s=HOUR, margin_s=120
    )


@pytest.mark.parametrize(
    ("billing", "field"),
    [
        ({"period": "1h", "margin": "1h"}, "spec.pools[0].billing.margin"),
        ({"period": "soon"}, "spec.pools[0].billing.period"),
        ({"period": -60}, "spec.pools[0].billing.period"),
        ({"margin": "5m"}, "spec.pools[0].billing.period"),
        ({"period": "1h", "every": "day"}, "spec.pools[0].billing.every"),
        ("1h", "spec.pools[0].billing"),
    ],
)
def test_bad_billing_is_refused_naming_the_field(billing: Any, field: str) -> None:
    with pytest.raises(InvalidSpec) as e:
        group(billing=billing)
    assert e.value.field == field


def test_an_empty_node_is_kept_untainted_until_its_paid_hour_is_ending() -> None:
    g = group()
    early = plan([node("n1"), node("keep")], BUSY, g, now=CREATED + 1200)
    d = early.decisions["n1"]
    assert (d.state, d.reason) == (NodeState.UNNEEDED_WAITING, BILLING_PERIOD)
    assert d.removable_at == CREATED + HOUR - 300 and early.to_remove == []
    assert early.unneeded_since["n1"] == CREATED + 1200  # its unneeded timer runs meanwhile
    late = plan([node("n1"), node("keep")], BUSY, g, now=CREATED + HOUR - 200)
    assert [r.name for r in late.to_remove] == ["n1"]
    assert late.to_remove[0].scale_down_at == CREATED + HOUR - 200  # no tainted wait past the hour


def test_without_billing_an_empty_node_goes_at_once_with_the_tainted_wait() -> None:
    g = group(billing={"period": 0})
    p = plan([node("n1"), node("keep")], BUSY, g, now=CREATED + 1200)
    assert [r.name for r in p.to_remove] == ["n1"]
    assert p.to_remove[0].scale_down_at == CREATED + 1200 + 600


def test_a_node_that_missed_its_window_waits_for_the_next_one() -> None:
    p = plan([node("n1"), node("keep")], BUSY, group(), now=CREATED + HOUR + 10)
    assert p.decisions["n1"].removable_at == CREATED + 2 * HOUR - 300


def test_an_underused_node_needs_its_unneeded_time_as_well() -> None:
    g = group()
    pods = [*BUSY, pod("small", "n1", cpu=100)]
    fresh = plan([node("n1"), node("keep")], pods, g, now=CREATED + HOUR - 200, since=CREATED + HOUR - 300)
    assert fresh.decisions["n1"].reason == UNNEEDED_TIME
    ready = plan([node("n1"), node("keep")], pods, g, now=CREATED + HOUR - 200, since=CREATED)
    assert [(r.name, r.kind) for r in ready.to_remove] == [("n1", NodeState.UNDERUSED)]


def test_protection_and_data_safety_still_win_inside_the_window() -> None:
    g = group()
    now = CREATED + HOUR - 200
    protected = plan([node("n1"), node("keep")], BUSY, g, now=now, protected={"n1"})
    assert (protected.decisions["n1"].state, protected.decisions["n1"].reason) == (NodeState.BLOCKED, PROTECTED)
    local = [*BUSY, pod("cache", "n1", has_local_storage=True)]
    blocked = plan([node("n1"), node("keep")], local, g, now=now, since=CREATED)
    assert (blocked.decisions["n1"].state, blocked.decisions["n1"].reason) == (NodeState.BLOCKED, LOCAL_STORAGE)
    assert blocked.to_remove == []


def test_a_bursty_replay_buys_fewer_servers_and_pays_less_with_billing_aware_scale_down() -> None:
    from bench.billing_day import bursty_day, node_group, simulate

    arrivals = bursty_day(hours=3, seed=3)
    aware = simulate(arrivals, node_group("1h"), hours=3)
    plain = simulate(arrivals, node_group(0), hours=3)
    assert aware.servers_created < plain.servers_created
    assert aware.cost < plain.cost
    assert aware.pod_wait_s_p50 < plain.pod_wait_s_p50  # pods land on kept nodes instead of waiting
