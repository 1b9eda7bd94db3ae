"""Scale-down end to end: Temporal dev server + simulated cluster (+ sim-Longhorn) + the real
worker, through the demo's headless scenarios (seed 003's test plan on the simulated cluster:
double the nodes, scale back, and Longhorn's state keeps only the nodes it must)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.demo import demo_summary


def run_demo(tmp_path: Path, scenario: str, *extra: str) -> dict:
    return demo_summary(tmp_path / scenario, "--scenario", scenario, "--timeout", "120", "--scan-interval", "1", *extra)


def test_scale_up_then_back_to_the_pool_minimum(tmp_path: Path) -> None:
    """Seed 003 "test CA": double the nodes with a deployment's replicas, then scale back to the
    original number."""
    s = run_demo(tmp_path, "scale-down", "--pods", "16")
    assert s["scenario"] == "scale-down"
    assert s["nodes_peak"] >= 2
    assert s["nodes_final"] == 0  # the pools' minimum
    assert s["nodes_removed"] == s["nodes_peak"]  # each node removed exactly once
    assert s["metrics"]["growth_scaled_down_nodes_total"] == s["nodes_removed"]
    assert s["metrics"]["growth_scaled_up_nodes_total"] == s["nodes_peak"]
    assert s["evictions_refused"] == 0 and s["blocked"] == {}


def test_storage_node_with_the_last_healthy_replica_goes_only_after_a_rebuild(tmp_path: Path) -> None:
    """Seed 003 "scale down all nodes containing volume replicas" with sim-Longhorn: the last healthy
    replica's node goes only after a rebuild elsewhere."""
    s = run_demo(tmp_path, "storage")
    assert s["scenario"] == "storage"
    assert s["nodes_peak"] == 6 and s["nodes_final"] == 3  # double, then the original number
    assert s["blocked_nodes_final"] == 1  # original + 1 blocked node before the re-attach
    assert s["blocked"].get("LonghornLastHealthyReplica") == 1
    assert s["blocked"].get("ScaleDownDisabledAnnotation") == 3  # the pinned new nodes
    assert s["nodes_removed"] == 3  # each old node removed once
    assert s["volume_checksum_unchanged"] is True


async def test_worker_killed_during_a_drain_resumes_and_removes_the_node_once(local_cluster) -> None:  # noqa: ANN001
    """An operator's remove-now drains a node whose pod a PDB holds; the worker is killed while
    the drain retries; a new worker resumes it; once the PDB allows, the node goes, once."""
    from kubernetes import client

    from activities.updates import execute_update
    from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
    from starters.kube import apply_node_group, deployment, node_group
    from tests.polling import until
    from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

    lc = local_cluster({"kwok": {}}, ["--node-ready-delay", "0"])
    core, apps = client.CoreV1Api(lc.api), client.AppsV1Api(lc.api)
    apply_node_group(lc.api, node_group("g", [{"provider": "kwok", "serverType": ["cx22"], "priority": 1}]))
    q = {"cpu": "2", "memory": "4Gi", "pods": "110"}
    for n in ("old", "spare"):
        core.create_node(
            {
                "metadata": {
                    "name": n,
                    "labels": {LABEL_GROUP: "g", LABEL_POOL: "kwok-cx22"},
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                },
                "spec": {"providerID": f"kwok://{n}"},
                "status": {"allocatable": q, "capacity": q},
            }
        )
    core.patch_node("spare", {"spec": {"unschedulable": True}})  # the pod starts on "old"
    apps.create_namespaced_deployment("default", deployment("db", 1, cpu="100m", memory="64Mi"))
    client.PolicyV1Api(lc.api).create_namespaced_pod_disruption_budget(
        "default", {"metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}
    )

    async def db_running_on_old():  # noqa: ANN202
        pods = core.list_namespaced_pod("default", label_selector="app=db").items
        return any(p.spec.node_name == "old" and p.status.phase == "Running" for p in pods)

    await until(db_running_on_old, 60, "db pod running on old")
    core.patch_node("spare", {"spec": {"unschedulable": False}})
    handle = await lc.start_autoscaler("kill", pdb_retry_s=120, eviction_retry_s=0.5)
    try:
        await until(lambda: _candidates(handle, {"old", "spare"}), 60, "both nodes evaluated")
        # spare is empty, so growth marks it for scale-down at once (seed 004: a growth node without
        # pods is tainted and removed after a delay); keep it as the
        # pod's new home. Protecting it cancels that removal and lifts the taint.
        await execute_update(handle, NodeAutoscalerWorkflow.protect_node, "spare")
        await execute_update(handle, NodeAutoscalerWorkflow.remove_node, "old")

        async def refused():  # noqa: ANN202
            s = await handle.query(NodeAutoscalerWorkflow.status)
            return any(
                sd.node == "old" and sd.phase.value == "Draining" and sd.evictions_refused >= 2 for sd in s.scale_downs
            )

        await until(refused, 60, "drain retrying evictions refused by the PDB")
        lc.worker.kill()
        lc.restart_worker("worker-2")
        client.PolicyV1Api(lc.api).delete_namespaced_pod_disruption_budget("db", "default")

        async def removed():  # noqa: ANN202
            s = await handle.query(NodeAutoscalerWorkflow.status)
            return s if s.scale_down_by_phase.get("Removed") else None

        status = await until(removed, 60, "node removed after the worker restart")
        old = [(sd.phase.value, sd.kind) for sd in status.recent_scale_downs if sd.node == "old"]
        assert old == [("Removed", "Manual")]  # one removal, resumed by the second worker
        assert status.scale_down_by_phase == {"Removed": 1, "Cancelled": 1}  # spare's, by the protect
        assert [n.metadata.name for n in core.list_node().items] == ["spare"]

        async def db_on_spare():  # noqa: ANN202
            pods = core.list_namespaced_pod("default", label_selector="app=db").items
            return [p for p in pods if p.spec.node_name == "spare"]

        await until(db_on_spare, 60, "db pod recreated on the spare node")
    finally:
        await handle.terminate()


async def _candidates(handle, names: set[str]):  # noqa: ANN001, ANN202
    from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

    s = await handle.query(NodeAutoscalerWorkflow.status)
    return {c.node for c in s.candidates} >= names


async def test_node_running_a_backing_image_manager_is_never_removed(local_cluster) -> None:  # noqa: ANN001
    """Seed 003 scenario 3 (a backing image manager pod blocks its node's scale-down): with
    Longhorn's autoscaler support on, a node that runs a backing-image-manager pod stays; an
    otherwise identical node goes."""
    from kubernetes import client

    from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
    from sim.storage.longhorn import FakeLonghorn
    from starters.kube import apply_node_group, node_group
    from tests.polling import until
    from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

    lc = local_cluster({"kwok": {}}, ["--node-ready-delay", "0"])
    core = client.CoreV1Api(lc.api)
    apply_node_group(
        lc.api,
        node_group(
            "g",
            [{"provider": "kwok", "serverType": ["cx22"], "priority": 1}],
            scaleDown={"unneededTime": "2s", "delayAfterAdd": "0s"},
        ),
    )
    q = {"cpu": "2", "memory": "4Gi", "pods": "110"}
    for n in ("keep", "go"):
        core.create_node(
            {
                "metadata": {
                    "name": n,
                    "labels": {LABEL_GROUP: "g", LABEL_POOL: "kwok-cx22"},
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                },
                "spec": {"providerID": f"kwok://{n}"},
                "status": {"allocatable": q, "capacity": q},
            }
        )
    longhorn = FakeLonghorn.from_kubeconfig(lc.kubeconfig, interval=0.2).start()  # server, token and CA
    try:
        bim = longhorn.add_backing_image_manager("keep")

        async def bim_running():  # noqa: ANN202
            pods = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=keep").items
            return any(p.metadata.name.startswith(bim) and p.status.phase == "Running" for p in pods)

        await until(bim_running, 60, "backing-image-manager pod running on keep")
        handle = await lc.start_autoscaler("bim")
        try:

            async def go_removed():  # noqa: ANN202
                s = await handle.query(NodeAutoscalerWorkflow.status)
                return s if s.scale_down_by_phase.get("Removed") == 1 else None

            status = await until(go_removed, 60, "the node without the manager removed")
            assert [n.metadata.name for n in core.list_node().items] == ["keep"]
            keep = [c for c in status.candidates if c.node == "keep"]
            assert keep and keep[0].reason == "LonghornBackingImageManager", status.candidates
            iterations = status.iterations

            async def later():  # noqa: ANN202
                s = await handle.query(NodeAutoscalerWorkflow.status)
                return s if s.iterations >= iterations + 5 else None

            status = await until(later, 60, "five more loops")
            assert [n.metadata.name for n in core.list_node().items] == ["keep"]  # never removed
            assert status.scale_down_by_phase == {"Removed": 1}  # no removal of keep was even started
        finally:
            await handle.terminate()
    finally:
        longhorn.stop()


async def test_an_unneeded_node_is_soft_tainted_so_new_pods_go_elsewhere_until_it_is_needed(local_cluster) -> None:  # noqa: ANN001
    """Cluster Autoscaler's soft taint on an unneeded node (actuation/softtaint.go): the loop puts
    DeletionCandidateOfClusterAutoscaler:PreferNoSchedule on the underused node while its unneeded
    time runs, so the scheduler sends a new pod to the fuller node (TaintToleration outweighs
    LeastAllocated) instead of the emptier one it would have taken, and the node can empty. A pod
    that fits only there still lands; the node is needed then, and the loop lifts the taint."""
    from kubernetes import client

    from scaling.kube.drain import TAINT_DELETION_CANDIDATE
    from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
    from starters.kube import apply_node_group, deployment, node_group
    from tests.polling import until

    lc = local_cluster({"kwok": {}}, ["--node-ready-delay", "0"])
    core, apps = client.CoreV1Api(lc.api), client.AppsV1Api(lc.api)
    pools = [{"provider": "kwok", "serverType": ["cx22"], "priority": 1}]
    apply_node_group(lc.api, node_group("g", pools, scaleDown={"unneededTime": "10m", "delayAfterAdd": "0s"}))
    q = {"cpu": "2", "memory": "4Gi", "pods": "110"}

    def make_node(name: str) -> None:
        labels = {LABEL_GROUP: "g", LABEL_POOL: "kwok-cx22", "kubernetes.io/hostname": name}
        meta = {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}}
        core.create_node({"metadata": meta, "spec": {"providerID": f"kwok://{name}"}, "status": {"allocatable": q, "capacity": q}})  # fmt: skip

    def placed(app: str) -> list[str]:
        pods = core.list_namespaced_pod("default", label_selector=f"app={app}").items
        return [p.spec.node_name for p in pods if p.spec.node_name]

    def soft(name: str) -> bool:
        return any(t.key == TAINT_DELETION_CANDIDATE for t in core.read_node(name).spec.taints or [])

    make_node("busy")
    apps.create_namespaced_deployment("default", deployment("base", 1, cpu="1000m", memory="256Mi"))
    await until(lambda: placed("base") == ["busy"], 30, "base on busy")
    make_node("light")
    apps.create_namespaced_deployment("default", deployment("lone", 1, cpu="200m", memory="128Mi"))
    await until(lambda: placed("lone") == ["light"], 30, "lone on the emptier light")
    handle = await lc.start_autoscaler("soft-unneeded")
    try:
        await until(lambda: soft("light"), 60, "the underused node soft-tainted")
        assert not soft("busy")
        apps.create_namespaced_deployment("default", deployment("new", 1, cpu="300m", memory="128Mi"))
        await until(lambda: placed("new"), 30, "new scheduled")
        assert placed("new") == ["busy"]  # the emptier node would have taken it untainted
        pinned = deployment("pinned", 1, cpu="1000m", memory="128Mi", nodeSelector={"kubernetes.io/hostname": "light"})
        apps.create_namespaced_deployment("default", pinned)
        await until(lambda: placed("pinned") == ["light"], 30, "pinned on the soft-tainted node")
        await until(lambda: not soft("light"), 60, "the taint lifted from the node needed again")
        assert sorted(n.metadata.name for n in core.list_node().items) == ["busy", "light"]
    finally:
        await handle.terminate()


async def test_a_pod_that_fits_only_a_waiting_empty_node_lands_there_and_keeps_it(local_cluster) -> None:  # noqa: ANN001
    """An empty node waits its unneeded time under Cluster Autoscaler's soft taint
    (DeletionCandidateOfClusterAutoscaler:PreferNoSchedule). A pod that fits no other node is
    scheduled there, the removal is cancelled and its taint lifted, and no node is bought for the
    pod. With the hard taint for the whole wait (growth before 30 Nov) the pod went pending and a
    node was bought while the empty one waited to be deleted."""
    from kubernetes import client

    from scaling.kube.drain import DELETION_TAINT_KEYS, TAINT_DELETION_CANDIDATE
    from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
    from starters.kube import apply_node_group, deployment, node_group
    from tests.polling import until
    from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

    lc = local_cluster({"kwok": {}}, ["--node-ready-delay", "0"])
    core, apps = client.CoreV1Api(lc.api), client.AppsV1Api(lc.api)
    pools = [{"provider": "kwok", "serverType": ["cx22"], "priority": 1}]
    apply_node_group(lc.api, node_group("g", pools, scaleDown={"unneededTime": "10m", "delayAfterAdd": "0s"}))
    q = {"cpu": "2", "memory": "4Gi", "pods": "110"}
    core.create_node(
        {
            "metadata": {
                "name": "idle",
                "labels": {LABEL_GROUP: "g", LABEL_POOL: "kwok-cx22"},
                "annotations": {"kwok.x-k8s.io/node": "fake"},
            },
            "spec": {"providerID": "kwok://idle"},
            "status": {"allocatable": q, "capacity": q},
        }
    )
    handle = await lc.start_autoscaler("soft")
    try:

        def soft_tainted() -> bool:
            return any(t.key == TAINT_DELETION_CANDIDATE for t in core.read_node("idle").spec.taints or [])

        await until(soft_tainted, 60, "the empty node soft-tainted for its wait")
        waiting = await handle.query(NodeAutoscalerWorkflow.status)
        assert [(sd.node, sd.phase.value) for sd in waiting.scale_downs] == [("idle", "Marked")]
        apps.create_namespaced_deployment("default", deployment("web", 1, cpu="500m", memory="256Mi"))

        def on_idle() -> bool:
            pods = core.list_namespaced_pod("default", label_selector="app=web").items
            return any(p.spec.node_name == "idle" for p in pods)

        await until(on_idle, 60, "the pod scheduled on the waiting node")

        async def cancelled():  # noqa: ANN202
            s = await handle.query(NodeAutoscalerWorkflow.status)
            return s if any(r.node == "idle" and r.reason == "PodsLandedOnNode" for r in s.recent_scale_downs) else None

        status = await until(cancelled, 60, "the removal cancelled by the pod that landed")
        assert not status.scale_downs

        def unmarked() -> bool:
            return not any(t.key in DELETION_TAINT_KEYS for t in core.read_node("idle").spec.taints or [])

        await until(unmarked, 30, "the soft taint lifted")
        assert [n.metadata.name for n in core.list_node().items] == ["idle"]  # nothing bought
        assert status.in_flight == [] and status.recent == [] and status.nodes_created == 0
    finally:
        await handle.terminate()
