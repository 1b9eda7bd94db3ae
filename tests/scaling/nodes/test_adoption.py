"""Nodes Cluster Autoscaler made, adopted into the pools migrated from their CA groups."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.nodes.adoption import CA_NODE_GROUP_LABEL, adopt_nodes, ca_group_of
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.contracts import ProviderMachine
from scaling.nodes.gc.leaks import find_leaked_machines
from scaling.nodes.migrate_ca import CaSettings, migrate
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
from scaling.nodes.nodegroups import load_node_groups
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_down.checks import pool_for
from scaling.nodes.scale_up.demand import tally_nodes
from scaling.nodes.scale_up.planning import plan_scale_up

CAT = catalogue_index(kwok_catalogue("hetzner"))
GI = 2**30


def migrated(*nodes_flags: str):  # type: ignore[no-untyped-def]
    groups, problems = load_node_groups(migrate(CaSettings(args=list(nodes_flags))).node_groups, {"hetzner"})
    assert problems == []
    return groups


def ca_node(name: str, server_id: int, **labels: str) -> NodeInfo:
    # hetzner_node_group.go newNodeName: fmt.Sprintf("%s-%x", group, rand.Int63()); the Node is the
    # server's hostname with providerID hcloud://<id> (hcloud-cloud-controller-manager).
    return NodeInfo(
        name=name,
        labels={"node.kubernetes.io/instance-type": "cx22", **labels},
        allocatable=Resources(cpu_m=1800, memory=3 * GI, pods=110),
        ready=True,
        provider_id=f"hcloud://{server_id}",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_ca_named_and_labelled_nodes_are_recognised() -> None:
    assert ca_group_of(ca_node("pool1-5f3a9c2e1b7d4a60", 1)) == "pool1"
    assert ca_group_of(ca_node("workers-a-1f", 2)) == "workers-a"
    assert ca_group_of(ca_node("anything", 3, **{CA_NODE_GROUP_LABEL: "pool2"})) == "pool2"
    assert ca_group_of(ca_node("pool1-notahexsuffix", 4)) is None
    kwok = ca_node("pool1-5f3a", 5).model_copy(update={"provider_id": "kwok://pool1-5f3a"})
    assert ca_group_of(kwok) is None  # not a Hetzner Cloud server


def test_adopted_nodes_count_against_their_pool_and_are_scaled_down_as_its() -> None:
    groups = migrated("--nodes=1:3:cx22:fsn1:pool1", "--nodes=0:2:cx22:nbg1:pool2")
    nodes = [
        ca_node("pool1-1a2b3c", 11),
        ca_node("pool1-4d5e6f", 12),
        ca_node("pool2-77", 13, **{CA_NODE_GROUP_LABEL: "pool2"}),
        ca_node("other-8f", 14),  # a CA group that was not migrated stays unknown
        ca_node("mine-abc", 15, **{LABEL_GROUP: "someone", LABEL_POOL: "else"}),  # growth's own: untouched
    ]
    adopted = adopt_nodes(nodes, groups)
    assert [(n.labels.get(LABEL_GROUP), n.labels.get(LABEL_POOL)) for n in adopted] == [
        ("pool1", "pool1"),
        ("pool1", "pool1"),
        ("pool1", "pool2"),
        (None, None),
        ("someone", "else"),
    ]
    counts = {(c.group, c.pool): c.count for c in tally_nodes(adopted).groups}
    assert counts[("pool1", "pool1")] == 2 and counts[("pool1", "pool2")] == 1
    # Scale-down reads them as the pool's nodes (its min size, its group's settings).
    assert pool_for(adopted[0], groups).min_nodes == 1
    assert adopt_nodes(nodes, []) == nodes  # nothing migrated: nothing changes


def test_adopted_nodes_are_never_duplicated_by_growth() -> None:
    # pool1 may hold 3 and CA made 2: four pods that each need a whole cx22 get one new node in
    # pool1 (its last seat) and the rest go to pool2 (max 2), never a fifth pool1 node.
    groups = migrated("--nodes=0:3:cx22:fsn1:pool1", "--nodes=0:2:cx22:nbg1:pool2")
    nodes = adopt_nodes([ca_node("pool1-1a2b3c", 11), ca_node("pool1-4d5e6f", 12)], groups)
    full = [n.model_copy(update={"requested": n.allocatable}) for n in nodes]
    pending = [
        PodInfo(namespace="ns", name=f"p{i}", uid=f"p{i}", requests=Resources(cpu_m=1500, memory=GI, pods=1))
        for i in range(4)
    ]
    plan = plan_scale_up(pending, full, groups, CAT, [])
    by_pool: dict[str, int] = {}
    for n in plan.new_nodes:
        by_pool[n.pool] = by_pool.get(n.pool, 0) + 1
    assert by_pool == {"pool1": 1, "pool2": 2}


def test_machine_gc_never_deletes_a_server_ca_made() -> None:
    ca_server = ProviderMachine(
        provider="hetzner",
        provider_id="hcloud://11",
        name="pool1-1a2b3c",
        labels={CA_NODE_GROUP_LABEL: "pool1"},
        created_at=0.0,
    )
    assert find_leaked_machines([ca_server], set(), set(), now=10_000.0, grace_s=300) == []
