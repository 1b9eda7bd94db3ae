"""Machine housekeeping activities over HTTP: the simulated cluster, the fake Hetzner API and the
real HetznerProvider. A removed or deprecated server type makes only its pool unusable: the
planner keeps using the other pools, and the group's status names the unusable one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from temporalio.testing import ActivityEnvironment

from activities.nodes.machines import MachineActivities
from activities.nodes.providers.hetzner import HetznerProvider, HetznerSettings
from scaling.kube.models import PodInfo, Resources
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.contracts import CollectedMachine, CreateNodeInput
from scaling.nodes.models import CRD_GROUP, CRD_VERSION
from scaling.nodes.nodegroups import flatten_pools, load_node_groups
from scaling.nodes.scale_up.planning import plan_scale_up
from sim.clouds.hetzner import FakeHetzner
from sim.cluster import FakeCluster
from starters.kube import apply_crds, apply_node_group, node_group

TOKEN = "hz-token"
JOIN = "abcdef.0123456789abcdef"
GIB = 1 << 30
GROUP = node_group(
    "general",
    [
        {"provider": "hetzner", "serverType": ["CAX11"], "priority": 90},
        {"provider": "hetzner", "serverType": ["CX31", "CX32"], "priority": 50},
        {"provider": "hetzner", "serverType": ["CX33"], "priority": 10},
    ],
)


@pytest.fixture
def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FakeCluster, FakeHetzner, MachineActivities]]:
    token_file = tmp_path / "hcloud-token"
    token_file.write_text(TOKEN)
    join_file = tmp_path / "join-token"
    join_file.write_text(JOIN)
    with (
        FakeCluster(node_ready_delay=0.1) as cluster,
        FakeHetzner(TOKEN, kube_url=cluster.url, kube_token=cluster.token, join_token=JOIN, boot_delay_s=0.05) as hz,
    ):
        provider = HetznerProvider(
            HetznerSettings(
                api_endpoint=hz.url,
                token_file=str(token_file),
                join_token_file=str(join_file),
                join_endpoint=cluster.url,
                cache_ttl_s=0.0,  # every call sees the API as it is now
                retry_base_s=0.01,
                retry_cap_s=0.05,
                timeout_s=5.0,
            )
        )
        api = cluster.api_client()
        apply_crds(api)
        apply_node_group(api, GROUP)
        yield cluster, hz, MachineActivities(api, {"hetzner": provider})
        api.close()


def group_status(acts: MachineActivities) -> dict[str, Any]:
    obj = client.CustomObjectsApi(acts.clusters.api("prod")).get_cluster_custom_object(
        CRD_GROUP, CRD_VERSION, "nodegroupswithpriority", "general"
    )
    return obj.get("status") or {}


async def test_removed_and_deprecated_types_are_reported_and_other_pools_keep_working(world) -> None:  # noqa: ANN001
    _cluster, hz, acts = world
    env = ActivityEnvironment()
    assert await env.run(acts.report_unusable_pools, "prod") == []
    assert "unusablePools" not in group_status(acts)

    hz.remove_server_type("cx31")
    hz.deprecate_server_type("cax11", "2020-01-01T00:00:00Z")
    found = await env.run(acts.report_unusable_pools, "prod")
    reasons = {p.pool: p.reason for p in found}
    assert set(reasons) == {"hetzner-cx31", "hetzner-cax11"}
    assert "not offered" in reasons["hetzner-cx31"]
    assert "deprecated" in reasons["hetzner-cax11"]
    written = {p["pool"]: p for p in group_status(acts)["unusablePools"]}
    assert set(written) == {"hetzner-cx31", "hetzner-cax11"}
    assert written["hetzner-cx31"]["serverType"] == "CX31"

    # The planner, fed the provider's catalogue, still serves pods from the usable pools.
    provider = acts.providers["hetzner"]
    catalogue = catalogue_index(await provider.server_types())
    groups, problems = load_node_groups([GROUP], {"hetzner"})
    assert not problems
    pods = [
        PodInfo(
            namespace="default",
            name=f"p{i}",
            uid=f"u{i}",
            requests=Resources(cpu_m=500, memory=GIB // 2, pods=1),
            unschedulable=True,
        )
        for i in range(4)
    ]
    plan = plan_scale_up(pods, [], groups, catalogue, [])
    assert plan.new_nodes and not plan.problems
    tried = {c.name for n in plan.new_nodes for c in n.candidates}
    assert tried and tried.isdisjoint({"hetzner-cx31", "hetzner-cax11"})
    # A create on the removed type answers "no capacity" (the request moves on), never raises.
    cx31 = next(p for p in flatten_pools(groups[0]) if p.name == "hetzner-cx31")
    result = await provider.create_node(
        CreateNodeInput(cluster="prod", request_id="nodes/prod/request/r1", attempt=0, pool=cx31)
    )
    assert result.outcome == "no_capacity" and "cx31" in result.message

    # The operator drops the dead pools from the group: the report clears.
    apply_node_group(
        acts.clusters.api("prod"),
        node_group("general", [{"provider": "hetzner", "serverType": ["CX32", "CX33"], "priority": 50}]),
    )
    assert await env.run(acts.report_unusable_pools, "prod") == []
    assert group_status(acts)["unusablePools"] == []


async def test_machines_nodes_and_collected_report(world) -> None:  # noqa: ANN001
    cluster, hz, acts = world
    env = ActivityEnvironment()
    provider = acts.providers["hetzner"]
    cx32 = next(p for p in flatten_pools(load_node_groups([GROUP], {"hetzner"})[0][0]) if p.name == "hetzner-cx32")
    made = await provider.create_node(
        CreateNodeInput(cluster="prod", request_id="nodes/prod/request/r2", attempt=0, pool=cx32)
    )
    assert made.outcome == "created"
    machines = await env.run(acts.list_provider_machines, "prod")
    assert [m.provider_id for m in machines] == [made.provider_id]
    assert await env.run(acts.list_provider_machines, "other-cluster") == []

    deadline = time.monotonic() + 30  # generous: the fake cloud boots the server into the cluster
    ids: list[str] = []
    while time.monotonic() < deadline and made.provider_id not in ids:
        ids = env.run(acts.list_node_provider_ids, "prod")
        await asyncio.sleep(0.05)
    assert made.provider_id in ids

    env.run(
        acts.report_collected_machine,
        CollectedMachine(
            cluster="prod", provider="hetzner", provider_id="hcloud://9", name="gone", group="general", reason="test"
        ),
    )
    events = client.CoreV1Api(acts.clusters.api("prod")).list_namespaced_event("default").items
    [ev] = [e for e in events if e.reason == "LeakedMachineDeleted"]
    assert ev.involved_object.kind == "NodeGroupWithPriority" and ev.involved_object.name == "general"
    assert "hcloud://9" in ev.message and ev.type == "Warning"
