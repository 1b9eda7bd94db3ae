"""`growth nodes what-if` by workflow id, end to end: a NodeAutoscaler that continued-as-new
(three loops per run) scales a cluster up on the dev server and the simulated cluster, then
the command replays all its runs from Temporal."""

from __future__ import annotations

import json

import yaml
from kubernetes import client

from scaling.nodes.status import AutoscalerStatus
from starters.kube import apply_node_group, deployment, node_group
from tests.cli import growth
from tests.e2e.conftest import LocalCluster
from tests.e2e.test_scale_up_e2e import pods_running, start_autoscaler
from tests.polling import until
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow


async def test_what_if_replays_every_run_by_workflow_id(local_cluster, tmp_path) -> None:  # noqa: ANN001
    lc: LocalCluster = local_cluster()
    apply_node_group(lc.api, node_group("general", [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}]))
    # The six pods are pending together before the loop starts: its first decision buys for all of
    # them, so a bigger type needs fewer nodes. Created once the loop ran, a busy machine showed them to
    # two decisions (the ReplicaSet's later pods came after the first had decided), and each bought
    # its own node, cx22 or cx42 alike.
    client.AppsV1Api(lc.api).create_namespaced_deployment("default", deployment("web", 6, cpu="500m", memory="256Mi"))

    def created() -> bool:
        return len(client.CoreV1Api(lc.api).list_namespaced_pod("default", label_selector="app=web").items) == 6

    await until(created, 30, "the deployment's 6 pods")
    handle = await start_autoscaler(lc, "whatif", iterations_per_run=3, machine_gc=False, scale_down_enabled=False)

    async def settled() -> AutoscalerStatus | None:
        s = await handle.query(NodeAutoscalerWorkflow.status)
        return s if pods_running(lc.api, "web") == 6 and not s.in_flight and s.runs >= 3 else None  # runs counts from 1

    status = await until(settled, 90, "6 pods running and two continue-as-new")
    connect = ["--address", lc.temporal.address, "--task-queue", lc.task_queue]
    out = await growth(*connect, "nodes", "--cluster", "whatif", "what-if", "-o", "json")
    report = json.loads(out.stdout)
    assert report["runs"] >= 3 and not report["truncated"]  # the runs before the continue-as-new, too
    assert report["total_recorded"]["nodes"] == status.nodes_created >= 2
    assert report["total_what_if"]["nodes"] == report["total_recorded"]["nodes"]  # the same inputs
    assert report["difference"]["server_types"] == {}
    # The same pods on a bigger type: fewer nodes, each dearer, nothing left pending.
    groups = tmp_path / "groups.yaml"
    groups.write_text(
        yaml.safe_dump(node_group("general", [{"provider": "kwok", "serverType": ["cx42"], "priority": 10}]))
    )
    out = await growth(*connect, "nodes", "--cluster", "whatif", "what-if", "--node-groups", str(groups), "-o", "json")
    bigger = json.loads(out.stdout)
    assert {c["server_type"] for c in bigger["total_what_if"]["choices"]} == {"cx42"}
    assert 1 <= bigger["total_what_if"]["nodes"] < status.nodes_created
    assert bigger["total_what_if"]["pods_pending"] == 0
    await handle.terminate()


async def test_trail_of_a_node_from_its_request_to_its_removal(local_cluster) -> None:  # noqa: ANN001
    lc: LocalCluster = local_cluster()
    apply_node_group(
        lc.api,
        node_group(
            "general",
            [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}],
            scaleDown={"unneededTime": "2s", "delayAfterAdd": "0s"},
        ),
    )
    handle = await start_autoscaler(lc, "trail", iterations_per_run=4, machine_gc=False)
    apps = client.AppsV1Api(lc.api)
    apps.create_namespaced_deployment("default", deployment("web", 2, cpu="500m", memory="256Mi"))
    await until(lambda: _running(lc), 60, "2 pods running")
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 0}})

    async def removed() -> AutoscalerStatus | None:
        s = await handle.query(NodeAutoscalerWorkflow.status)
        return s if s.scale_down_by_phase.get("Removed") else None

    status = await until(removed, 90, "a node removed")
    node = next(r.node_name for r in status.recent if r.node_name)
    connect = ["--address", lc.temporal.address, "--task-queue", lc.task_queue]

    async def full_trail() -> dict | None:  # visibility lists the NodeScaleDown a moment later
        out = await growth(*connect, "nodes", "--cluster", "trail", "trail", node, "-o", "json")
        trail = json.loads(out.stdout)
        return trail if any(e["what"] == "Removed" for e in trail["entries"]) else None

    trail = await until(full_trail, 30, f"the trail of {node} to reach its removal", every=1)
    kinds = [e["what"] for e in trail["entries"]]
    for step in ("Planned", "AskedBy", "Attempt", "Ready", "Selected", "Marked", "Rechecked", "Removed"):
        assert step in kinds, (step, kinds)
    assert kinds.index("Planned") < kinds.index("Ready") < kinds.index("Removed")
    assert f"nodes/trail/scale-down/{node}" in trail["sources"] and len(trail["sources"]) == 3
    table = (await growth(*connect, "nodes", "--cluster", "trail", "trail", node)).stdout
    assert table.startswith(f"trail of {node}") and "Removed" in table
    missing = await growth(*connect, "nodes", "--cluster", "trail", "trail", "no-such-node", expect=1)
    assert "no trail of node no-such-node" in missing.stderr
    await handle.terminate()


async def _running(lc: LocalCluster) -> bool:
    return pods_running(lc.api, "web") == 2


async def test_what_if_consolidate_reads_the_cluster_and_prices_a_cheaper_successor(local_cluster) -> None:  # noqa: ANN001
    """A cx52 bought for a 3-cpu pod; once the group also lists cx32 first, consolidation would replace
    the cx52 by a cx32 (the pod fits on no other node), and the command says so with both prices."""
    lc: LocalCluster = local_cluster()
    apply_node_group(lc.api, node_group("general", [{"provider": "kwok", "serverType": ["cx52"], "priority": 10}]))
    handle = await start_autoscaler(lc, "consolidate", machine_gc=False, scale_down_enabled=False)
    client.AppsV1Api(lc.api).create_namespaced_deployment("default", deployment("big", 1, cpu="3", memory="1Gi"))
    await until(lambda: pods_running(lc.api, "big") == 1, 90, "the pod running on a cx52")
    await handle.terminate()
    cheaper = [
        {"provider": "kwok", "serverType": ["cx32"], "priority": 20},
        {"provider": "kwok", "serverType": ["cx52"], "priority": 10},
    ]
    apply_node_group(lc.api, node_group("general", cheaper))
    out = await growth(
        "--config", str(lc.config_path), "nodes", "--cluster", "consolidate", "what-if", "consolidate", "-o", "json"
    )
    report = json.loads(out.stdout)
    [step] = report["steps"]
    assert (step["kind"], step["server_type"], step["successors"]) == ("Consolidated", "cx52", ["kwok/cx32"])
    assert report["price_per_hour_after"] < 0.9 * report["price_per_hour_before"]
    table = await growth("--config", str(lc.config_path), "nodes", "--cluster", "consolidate", "what-if", "consolidate")
    assert "Consolidated" in table.stdout and "saved" in table.stdout
