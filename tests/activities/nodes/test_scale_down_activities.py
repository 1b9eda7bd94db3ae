"""Scale-down activities against the simulated cluster over HTTP, with the official client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from kubernetes import client
from temporalio.testing import ActivityEnvironment

from activities.kube.client import ClusterClients
from activities.nodes.kube import KubeActivities
from activities.nodes.scale_down import ScaleDownActivities
from scaling.kube.drain import (
    ANNOTATION_SCALE_DOWN_AT,
    DELETION_TAINT_KEYS,
    TAINT_DELETION_CANDIDATE,
    TAINT_DISRUPTED,
    TAINT_TO_BE_DELETED,
)
from scaling.nodes.contracts import (
    DisruptedTaintInput,
    EvictPodInput,
    MarkNodeInput,
    NodeEvent,
    NodeEventsInput,
    NodeRef,
    NodeRemovalCheckInput,
    ObserveInput,
    ProviderMachine,
    ScaleDownEvaluationInput,
    SoftTaintInput,
    UnmarkNodeInput,
    WaitPodsGoneInput,
)
from scaling.nodes.gc.orphans import OrphanSearchInput
from scaling.nodes.models import LABEL_GROUP, ServerType
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_down.models import ScaleDownLoopSettings
from sim.cluster import FakeCluster
from sim.storage.longhorn import FakeLonghorn
from tests.polling import eventually

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(node_ready_delay=0.0, pod_start_delay=0.0, run_scheduler=False) as c:
        yield c


@pytest.fixture
def core(cluster: FakeCluster) -> client.CoreV1Api:
    api = client.CoreV1Api(cluster.api_client())
    for n in ("n1", "n2"):
        q = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        api.create_node(
            {
                "metadata": {"name": n, "labels": {LABEL_GROUP: "g"}, "annotations": {"kwok.x-k8s.io/node": "fake"}},
                "spec": {"providerID": f"kwok://{n}"},
                "status": {"allocatable": q, "capacity": q, "conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
    return api


@pytest.fixture
def acts(cluster: FakeCluster, core: client.CoreV1Api) -> ScaleDownActivities:
    return ScaleDownActivities(cluster.api_client(), known_providers=["kwok"])


def bound_pod(core: client.CoreV1Api, name: str, node: str, labels: dict[str, str] | None = None) -> None:
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": name, "labels": labels or {"app": "web"}},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
            },
        },
    )


def test_mark_is_idempotent_and_unmark_restores_only_what_growth_changed(
    acts: ScaleDownActivities, core: client.CoreV1Api
) -> None:
    core.patch_node("n1", {"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}})
    assert acts.mark_node_for_scale_down(MarkNodeInput(cluster="c", node="n1", scale_down_at="2030-01-01T00:00:00Z"))
    assert acts.mark_node_for_scale_down(MarkNodeInput(cluster="c", node="n1", scale_down_at="2030-01-01T00:00:00Z"))
    node = core.read_node("n1")
    assert sorted(t.key for t in node.spec.taints) == sorted(["dedicated", TAINT_TO_BE_DELETED])
    assert node.metadata.annotations[ANNOTATION_SCALE_DOWN_AT] == "2030-01-01T00:00:00Z"
    acts.cordon_node(NodeRef(cluster="c", node="n1"))
    assert core.read_node("n1").spec.unschedulable is True
    acts.unmark_node(UnmarkNodeInput(cluster="c", node="n1", uncordon=True))

    # The sim's node lifecycle controller lifts its node.kubernetes.io/unschedulable taint a pass
    # after the uncordon, as the real one does; growth's own taint must be gone with it.
    def only_users_taint() -> client.V1Node | None:
        node = core.read_node("n1")
        return node if [t.key for t in node.spec.taints or []] == ["dedicated"] else None

    node = eventually(only_users_taint, timeout=10, message="only the user's taint left after unmark")
    assert ANNOTATION_SCALE_DOWN_AT not in (node.metadata.annotations or {})
    assert not node.spec.unschedulable
    # A node cordoned by someone else stays cordoned.
    core.patch_node("n2", {"spec": {"unschedulable": True}})
    acts.cordon_node(NodeRef(cluster="c", node="n2"))
    acts.unmark_node(UnmarkNodeInput(cluster="c", node="n2", uncordon=True))
    assert core.read_node("n2").spec.unschedulable is True
    assert acts.mark_node_for_scale_down(MarkNodeInput(cluster="c", node="gone", scale_down_at="x")) is False


def test_a_waiting_node_is_soft_tainted_then_hard_and_unmark_lifts_either(
    acts: ScaleDownActivities, core: client.CoreV1Api
) -> None:
    """While it waits, Cluster Autoscaler's soft taint (DeletionCandidateOfClusterAutoscaler,
    PreferNoSchedule, a unix time as its value: utils/taints/taints.go); when the wait is over the
    hard one takes its place, never both; unmark lifts whichever is there."""

    def growths(name: str) -> list[tuple[str, str | None]]:
        return [(t.key, t.effect) for t in core.read_node(name).spec.taints or [] if t.key in DELETION_TAINT_KEYS]

    waiting = MarkNodeInput(cluster="c", node="n1", scale_down_at="2030-01-01T00:00:00Z", candidate=True)
    assert acts.mark_node_for_scale_down(waiting) and acts.mark_node_for_scale_down(waiting)
    assert growths("n1") == [(TAINT_DELETION_CANDIDATE, "PreferNoSchedule")]
    (soft,) = [t for t in core.read_node("n1").spec.taints if t.key == TAINT_DELETION_CANDIDATE]
    assert soft.value.isdigit()
    assert core.read_node("n1").metadata.annotations[ANNOTATION_SCALE_DOWN_AT] == "2030-01-01T00:00:00Z"
    assert acts.mark_node_for_scale_down(waiting.model_copy(update={"candidate": False}))
    assert growths("n1") == [(TAINT_TO_BE_DELETED, "NoSchedule")]
    acts.unmark_node(UnmarkNodeInput(cluster="c", node="n1"))
    assert growths("n1") == []
    assert acts.mark_node_for_scale_down(waiting.model_copy(update={"node": "n2"}))
    acts.unmark_node(UnmarkNodeInput(cluster="c", node="n2"))
    assert growths("n2") == [] and ANNOTATION_SCALE_DOWN_AT not in (core.read_node("n2").metadata.annotations or {})


def test_the_loops_soft_taint_is_put_on_and_lifted_as_cluster_autoscalers(
    acts: ScaleDownActivities, core: client.CoreV1Api
) -> None:
    """Cluster Autoscaler's UpdateSoftDeletionTaints (core/scaledown/actuation/softtaint_test.go
    TestSoftTaintUpdate): the soft taint, a unix time as its value, put on once however often asked,
    lifted keeping every other taint; a node tainted ToBeDeleted left alone; a node gone not reported."""
    core.patch_node("n1", {"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}})
    on = SoftTaintInput(cluster="c", taint=["n1", "n2", "gone"])
    assert acts.update_soft_deletion_taints(on) == ["n1", "n2"]
    assert acts.update_soft_deletion_taints(on) == []  # already there: nothing written

    def taints(name: str) -> list[tuple[str, str | None]]:
        return [(t.key, t.effect) for t in core.read_node(name).spec.taints or [] if not t.key.startswith("node.")]

    assert taints("n1") == [("dedicated", "NoSchedule"), (TAINT_DELETION_CANDIDATE, "PreferNoSchedule")]
    (soft,) = [t for t in core.read_node("n2").spec.taints if t.key == TAINT_DELETION_CANDIDATE]
    assert soft.value.isdigit()
    assert acts.update_soft_deletion_taints(SoftTaintInput(cluster="c", untaint=["n1", "n2"])) == ["n1", "n2"]
    assert taints("n1") == [("dedicated", "NoSchedule")] and taints("n2") == []
    # A node being deleted keeps what it has: neither added nor lifted.
    assert acts.mark_node_for_scale_down(MarkNodeInput(cluster="c", node="n1", scale_down_at="x"))
    assert acts.update_soft_deletion_taints(SoftTaintInput(cluster="c", taint=["n1"])) == []
    assert (TAINT_DELETION_CANDIDATE, "PreferNoSchedule") not in taints("n1")


def test_the_soft_taints_stop_once_their_time_is_spent(
    acts: ScaleDownActivities, core: client.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CA's --max-bulk-soft-taint-time (softtaint_test.go TestSoftTaintTimeLimit: its clock moves on
    at each update): no call starts once the budget has passed, lifts first; a later loop names the
    rest again."""
    import types

    import activities.nodes.scale_down as module

    clock = [0.0]
    monkeypatch.setattr(module, "time", types.SimpleNamespace(monotonic=lambda: clock[0], time=time.time))
    change = acts._change_node

    def slow_change(*args, **kwargs):  # noqa: ANN202
        clock[0] += 1.0  # each node's update takes a second
        return change(*args, **kwargs)

    monkeypatch.setattr(acts, "_change_node", slow_change)
    core.patch_node("n2", {"spec": {"taints": [{"key": TAINT_DELETION_CANDIDATE, "value": "1", "effect": "PreferNoSchedule"}]}})  # fmt: skip
    both = SoftTaintInput(cluster="c", taint=["n1"], untaint=["n2"], time_budget_s=1.0)
    assert acts.update_soft_deletion_taints(both) == ["n2"]  # the lift first; then the second is spent
    assert acts.update_soft_deletion_taints(both.model_copy(update={"untaint": []})) == ["n1"]
    assert acts.update_soft_deletion_taints(both.model_copy(update={"time_budget_s": 0.0})) == []
    assert [t.key for t in core.read_node("n1").spec.taints or []].count(TAINT_DELETION_CANDIDATE) == 1
    assert TAINT_DELETION_CANDIDATE not in [t.key for t in core.read_node("n2").spec.taints or []]


def test_the_disrupted_taint_is_added_once_and_lifted_keeping_every_other_taint(
    acts: ScaleDownActivities, core: client.CoreV1Api
) -> None:
    """Karpenter's karpenter.sh/disrupted:NoSchedule on a command's nodes (RequireNoScheduleTaint): added
    once however often asked, lifted without the users' taints, and a node gone is not reported."""
    core.patch_node("n1", {"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}})
    on = DisruptedTaintInput(cluster="c", nodes=["n1", "n2", "gone"], present=True)
    assert acts.taint_disrupted(on) == ["n1", "n2"]
    assert acts.taint_disrupted(on) == ["n1", "n2"]

    def users(name: str) -> list[tuple[str, str | None]]:
        return [(t.key, t.effect) for t in core.read_node(name).spec.taints or [] if not t.key.startswith("node.")]

    assert users("n1") == [("dedicated", "NoSchedule"), (TAINT_DISRUPTED, "NoSchedule")]
    assert users("n2") == [(TAINT_DISRUPTED, "NoSchedule")]
    acts.taint_disrupted(DisruptedTaintInput(cluster="c", nodes=["n1", "n2"], present=False))
    assert users("n1") == [("dedicated", "NoSchedule")] and users("n2") == []


def test_the_loops_lift_takes_the_deletion_marks_too_and_a_commands_does_not(
    acts: ScaleDownActivities, core: client.CoreV1Api
) -> None:
    """The loop lifts what no removal holds: karpenter.sh/disrupted, both deletion taints and growth's
    ScaleDownAt annotation (``marks``). A command lifting its own disrupted taint leaves a mark, which
    belongs to its nodes' removals."""
    assert acts.mark_node_for_scale_down(MarkNodeInput(cluster="c", node="n1", scale_down_at="x", candidate=True))
    core.patch_node("n1", {"spec": {"taints": [*core.read_node("n1").spec.taints, {"key": "dedicated", "effect": "NoSchedule"}]}})  # fmt: skip
    acts.taint_disrupted(DisruptedTaintInput(cluster="c", nodes=["n1"], present=True))
    acts.taint_disrupted(DisruptedTaintInput(cluster="c", nodes=["n1"], present=False))
    keys = {t.key for t in core.read_node("n1").spec.taints}
    assert TAINT_DELETION_CANDIDATE in keys and TAINT_DISRUPTED not in keys
    acts.taint_disrupted(DisruptedTaintInput(cluster="c", nodes=["n1", "gone"], present=False, marks=True))
    node = core.read_node("n1")
    assert [t.key for t in node.spec.taints if not t.key.startswith("node.")] == ["dedicated"]
    assert ANNOTATION_SCALE_DOWN_AT not in (node.metadata.annotations or {})


def test_a_taint_another_writer_changes_between_read_and_patch_is_kept(
    acts: ScaleDownActivities, core: client.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spec.taints is replaced whole by a patch: marking from a read that another writer (the node
    lifecycle controller, a user) changed since would bring back a taint since removed or drop one
    since added. The patch carries the read's resourceVersion; on the conflict the mark reads again
    (Cluster Autoscaler's utils/taints does the same with Update). Users' taints here: the sim's node
    lifecycle controller writes its own ones at moments of its choosing."""
    core.patch_node("n1", {"spec": {"taints": [{"key": "early", "effect": "NoSchedule"}]}})
    read = acts._read_node
    writes = iter(
        [
            {"spec": {"taints": []}},  # "early" lifted after the mark's first read
            {"spec": {"taints": [{"key": "late", "effect": "NoSchedule"}]}},  # "late" added after its second
        ]
    )

    def read_then_write(cluster: str, name: str):  # noqa: ANN202
        node = read(cluster, name)
        if (w := next(writes, None)) is not None:
            core.patch_node(name, w)  # lands after the read, before the mark's patch
        return node

    monkeypatch.setattr(acts, "_read_node", read_then_write)
    assert acts.mark_node_for_scale_down(MarkNodeInput(cluster="c", node="n1", scale_down_at="x"))
    assert [t.key for t in core.read_node("n1").spec.taints] == ["late", TAINT_TO_BE_DELETED]


async def test_evict_honours_pdbs_and_reports_gone_pods(
    acts: ScaleDownActivities, core: client.CoreV1Api, cluster: FakeCluster
) -> None:
    bound_pod(core, "web-1", "n1")
    bound_pod(core, "db-1", "n1", labels={"app": "db"})
    client.PolicyV1Api(cluster.api_client()).create_namespaced_pod_disruption_budget(
        "default", {"metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}
    )
    deadline = time.monotonic() + 60  # KWOK starts the pods; a PDB only guards running pods
    while any(p.status.phase != "Running" for p in core.list_namespaced_pod("default").items):
        assert time.monotonic() < deadline, "pods never ran"
        time.sleep(0.05)
    assert acts.evict_pod(EvictPodInput(cluster="c", namespace="default", name="web-1")).outcome == "evicted"
    refused = acts.evict_pod(EvictPodInput(cluster="c", namespace="default", name="db-1"))
    assert refused.outcome == "refused" and "disruption budget" in refused.message
    assert acts.evict_pod(EvictPodInput(cluster="c", namespace="default", name="web-1")).outcome == "gone"
    # The evicted pod goes (waited for with a generous deadline: the call returns as soon as it
    # is gone); the one a PDB holds is still there when the wait gives up.
    env = ActivityEnvironment()
    assert (
        await env.run(
            acts.wait_pods_gone,
            WaitPodsGoneInput(cluster="c", node="n1", pods=["default/web-1"], timeout_s=30, poll_s=0.1),
        )
        == []
    )
    held = WaitPodsGoneInput(cluster="c", node="n1", pods=["default/web-1", "default/db-1"], timeout_s=0.3, poll_s=0.1)
    assert await env.run(acts.wait_pods_gone, held) == ["default/db-1"]


def test_a_drain_evicts_a_pod_of_its_name_only_on_its_node(acts: ScaleDownActivities, core: client.CoreV1Api) -> None:
    """A StatefulSet's new pod takes the old one's name: after evict_in_order evicted web-0 from n1,
    n1's drain must not evict the web-0 now on n2."""
    bound_pod(core, "web-0", "n2")
    moved = EvictPodInput(cluster="c", namespace="default", name="web-0", node="n1")
    assert acts.evict_pod(moved).outcome == "gone"
    assert core.read_namespaced_pod("web-0", "default").spec.node_name == "n2"
    here = moved.model_copy(update={"node": "n2"})
    assert acts.evict_pod(here).outcome == "evicted"
    assert acts.evict_pod(here).outcome == "gone"


def test_observe_sees_all_pods_pdbs_and_longhorn_only_when_installed(
    acts: ScaleDownActivities, core: client.CoreV1Api, cluster: FakeCluster
) -> None:
    bound_pod(core, "web-1", "n1")
    obs = acts.observe_scale_down("c")
    assert {n.name for n in obs.nodes} == {"n1", "n2"} and [p.name for p in obs.pods] == ["web-1"]
    assert obs.storage is None
    with FakeLonghorn(cluster.url, cluster.token, ca_pem=cluster.certs.ca_pem, interval=0.05) as lh:
        lh.create_volume("vol-1", replicas=2)
        lh.attach("vol-1", "n1")
        assert lh.wait_until(lambda: lh.pdb_nodes() == {"n1", "n2"}, timeout=60)
        # The observation reads informer caches: the volume's attachment and its second replica
        # may reach them in either order (main once failed on {'n1'} == {'n1', 'n2'} under load).
        assert lh.wait_until(
            lambda: bool(
                (s := acts.observe_scale_down("c").storage)
                and s.volumes
                and s.volumes[0].node == "n1"
                and {r.node for r in s.replicas} == {"n1", "n2"}
            ),
            timeout=60,
        )
        obs = acts.observe_scale_down("c")
        assert obs.storage is not None and {r.node for r in obs.storage.replicas} == {"n1", "n2"}
        assert {p.namespace for p in obs.pdbs} == {"longhorn-system"} and len(obs.pdbs) == 2


def test_evaluate_plans_beside_the_cluster_and_returns_growth_nodes_only(
    acts: ScaleDownActivities, core: client.CoreV1Api
) -> None:
    """evaluate_scale_down lists the cluster itself: n2 (empty) is chosen with its providerID,
    n1 runs a bare pod (blocked, and no longer empty if it were waiting), the static node is
    not growth's and never appears."""
    q = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    core.create_node(
        {
            "metadata": {"name": "static"},
            "status": {"allocatable": q, "capacity": q, "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    bound_pod(core, "web-1", "n1")
    now = time.time()
    ev = acts.evaluate(
        ScaleDownEvaluationInput(cluster="c", now=now, watch_empty=["n1", "n2", "gone"], unneeded_since={"gone": 1.0})
    )
    assert [(t.name, t.kind.value, t.provider_id, t.scale_down_at) for t in ev.to_remove] == [
        ("n2", "Empty", "kwok://n2", now + 600)
    ]
    assert {c.node: (c.state, c.reason) for c in ev.candidates} == {
        "n1": ("Blocked", "NotReplicated"),
        "n2": ("Empty", None),
    }
    assert ev.not_empty == ["n1"]
    assert (ev.unneeded_started, ev.unneeded_ended) == (["n2"], ["gone"])
    assert (ev.nodes, ev.pods) == (3, 1)
    # One node's re-check, beside the cluster too.
    n1 = acts.check_node_removal(NodeRemovalCheckInput(cluster="c", node="n1", now=now))
    assert n1.found and n1.managed and n1.provider_id == "kwok://n1"
    assert [b.code for b in n1.blockers] == ["NotReplicated"] and n1.pods_to_evict == ["default/web-1"]
    n2 = acts.check_node_removal(NodeRemovalCheckInput(cluster="c", node="n2", now=now, require_empty=True))
    assert n2.found and n2.blockers == [] and n2.pods_to_evict == []
    assert not acts.check_node_removal(NodeRemovalCheckInput(cluster="c", node="gone", now=now)).found
    assert not acts.check_node_removal(NodeRemovalCheckInput(cluster="c", node="static", now=now)).managed


def test_observe_carries_deletion_grace_and_local_volumes(acts: ScaleDownActivities, core: client.CoreV1Api) -> None:
    """What the long-terminating and local-storage rules need survives the official client."""
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "stuck", "finalizers": ["example.com/hold"]},
            "spec": {
                "nodeName": "n1",
                "terminationGracePeriodSeconds": 5,
                "containers": [{"name": "c", "image": "pause"}],
                "volumes": [
                    {"name": "shm", "emptyDir": {"medium": "Memory"}},
                    {"name": "scratch", "emptyDir": {}},
                ],
            },
        },
    )
    before = time.time()
    core.delete_namespaced_pod("stuck", "default")  # held by its finalizer: deletionTimestamp set
    [pod] = acts.observe_scale_down("c").pods
    assert pod.termination_grace_period_s == 5
    assert pod.deletion_timestamp is not None and pod.deletion_timestamp.timestamp() >= before - 2
    assert pod.local_volumes == ["scratch"] and pod.has_local_storage


def test_delete_node_object_and_events(acts: ScaleDownActivities, core: client.CoreV1Api) -> None:
    acts.emit_node_events(
        NodeEventsInput(
            cluster="c",
            events=[NodeEvent(node="n1", reason="ScaleDownBlocked", message="NotEnoughPdb: held", type="Warning")],
        )
    )
    events = core.list_namespaced_event("default").items
    assert [(e.involved_object.kind, e.involved_object.name, e.reason) for e in events] == [
        ("Node", "n1", "ScaleDownBlocked")
    ]
    acts.delete_node_object(NodeRef(cluster="c", node="n1"))
    acts.delete_node_object(NodeRef(cluster="c", node="n1"))  # already gone: success
    assert [n.metadata.name for n in core.list_node().items] == ["n2"]


def test_the_recheck_before_removal_reads_the_nodes_pods_from_the_api_server(
    acts: ScaleDownActivities, core: client.CoreV1Api
) -> None:
    """The re-check right before a machine goes lists only the node's pods, by field selector,
    from the API server; the rest of the cluster comes from the worker's cache. A pod that lands
    on the node while the cache lags (its pods watch stopped here) still cancels the removal."""
    bound_pod(core, "web-1", "n1")
    now = time.time()
    empty = NodeRemovalCheckInput(cluster="c", node="n2", now=now, require_empty=True)
    assert acts.check_node_removal(empty).blockers == []
    acts.clusters.caches("c").informer("pods").stop()  # the cache no longer follows the cluster
    bound_pod(core, "late", "n2")
    from_cache = acts.check_node_removal(empty.model_copy(update={"from_cache": True}))
    assert from_cache.blockers == [] and from_cache.pods_to_evict == []  # the cache has not seen it
    check = acts.check_node_removal(empty)
    assert [b.code for b in check.blockers] == ["NodeNotEmpty", "NotReplicated"]
    assert check.pods_to_evict == ["default/late"]
    # The other node's pod (from the cache) still counts where it runs.
    n1 = acts.check_node_removal(NodeRemovalCheckInput(cluster="c", node="n1", now=now))
    assert n1.pods_to_evict == ["default/web-1"]


def replicated_pod(core: client.CoreV1Api, name: str, node: str) -> str:
    """A ReplicaSet's pod bound to `node`; its resourceVersion."""
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {
                "name": name,
                "labels": {"app": "web"},
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1", "controller": True}
                ],
            },
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
            },
        },
    )

    # The simulated kubelet starts it a moment later (its own write): wait for that, so the
    # caller's token is not taken between the two writes.
    def running() -> client.V1Pod | None:
        now = core.read_namespaced_pod(name, "default")
        return now if now.status.phase == "Running" else None

    return eventually(running, message=f"pod {name} never started").metadata.resource_version


def test_an_evaluation_is_reused_while_nothing_changes_and_no_timer_runs_out(
    acts: ScaleDownActivities, core: client.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle loop's evaluation answers from the last one (no plan over every pod) while the
    cache has not changed, the input is the same and `now` is before its first timer; a change in
    the cluster, in the input or a timer running out plans again, and the plan is the same one a
    fresh worker makes."""
    import activities.nodes.scale_down as module

    plans: list[float] = []
    real = module.evaluation_of

    def counted(obs, inp, prices=None):  # noqa: ANN001, ANN202 - a spy with the real signature
        plans.append(inp.now)
        return real(obs, inp, prices)

    monkeypatch.setattr(module, "evaluation_of", counted)
    replicated_pod(core, "web-1", "n1")
    rv = replicated_pod(core, "web-2", "n2")
    t0 = time.time()
    # No soft taints: an evaluation naming some is never reused (the next loop sees what they did).
    off = ScaleDownLoopSettings(max_bulk_soft_taint_count=0)
    first = acts.evaluate(ScaleDownEvaluationInput(cluster="c", now=t0, fresh={"pods": rv}))
    assert first.unneeded_started == ["n1", "n2"] and first.to_remove == []  # both underused: timers start
    assert first.soft_taint == ["n1", "n2"] and first.stable_until is None
    since = {"n1": t0, "n2": t0}
    inp = ScaleDownEvaluationInput(cluster="c", now=t0 + 2, unneeded_since=since, fresh={"pods": rv}, settings=off)
    second = acts.evaluate(inp)  # the timers are new input: planned
    assert second.unneeded_started == [] and len(plans) == 2
    idle = [
        acts.evaluate(inp.model_copy(update={"now": t0 + 2 + i, "candidates_digest": second.candidates_digest}))
        for i in range(1, 4)
    ]
    assert len(plans) == 2  # three idle loops, no plan
    assert all(ev.candidates_unchanged and ev.to_remove == [] for ev in idle)
    fresh_worker = ScaleDownActivities(acts.clusters, known_providers=["kwok"])
    made = fresh_worker.evaluate(inp.model_copy(update={"now": t0 + 3, "candidates_digest": second.candidates_digest}))
    assert idle[0].model_dump(exclude={"stable_until"}) == made.model_dump(exclude={"stable_until"})
    del plans[2:]  # the fresh worker's plan
    # The workflow's state changed (an operator protected a node): planned.
    acts.evaluate(inp.model_copy(update={"now": t0 + 6, "protected": ["n1"]}))
    assert len(plans) == 3
    # The cluster changed: planned (the watch has it: the input asks for its version).
    rv = replicated_pod(core, "web-3", "n2")
    changed = acts.evaluate(inp.model_copy(update={"now": t0 + 7, "fresh": {"pods": rv}}))
    assert len(plans) == 4 and changed.pods == 3
    again = inp.model_copy(update={"now": t0 + 8, "fresh": {"pods": rv}})
    acts.evaluate(again)
    assert len(plans) == 4
    # The catalogue's prices changed (they order consolidation's candidates): planned.
    acts.evaluate(again, {"kwok/cx22": 0.0065})
    assert len(plans) == 5
    # The unneeded time (600 s) runs out: planned, and a node is removed.
    due = acts.evaluate(again.model_copy(update={"now": t0 + 600}), {"kwok/cx22": 0.0065})
    assert len(plans) == 6 and [t.name for t in due.to_remove] == ["n1"]


async def test_the_evaluation_reads_the_providers_prices_and_goes_on_without_one_that_fails(
    cluster: FakeCluster, core: client.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """evaluate_scale_down hands the providers' catalogue prices to the plan (consolidation's order:
    Karpenter's price per unit of disruption); a provider whose catalogue cannot be read, or not in
    PRICES_WAIT_S, prices nothing, and the evaluation still answers."""
    import activities.nodes.scale_down as module

    class Priced:
        async def server_types(self) -> list[ServerType]:
            return [t for t in kwok_catalogue() if t.name == "cx22"]

    class Down:
        async def server_types(self) -> list[ServerType]:
            raise ConnectionError("catalogue unreachable")

    class Slow:  # an API hcloud keeps retrying
        async def server_types(self) -> list[ServerType]:
            await asyncio.Event().wait()
            return []

    seen: list[dict[str, float] | None] = []
    real = module.evaluation_of

    def spy(obs, inp, prices=None):  # noqa: ANN001, ANN202 - a spy with the real signature
        seen.append(prices)
        return real(obs, inp, prices)

    monkeypatch.setattr(module, "evaluation_of", spy)
    monkeypatch.setattr(module, "PRICES_WAIT_S", 0.05)
    providers = {"kwok": Priced(), "hetzner": Down(), "slow": Slow()}
    acts = ScaleDownActivities(cluster.api_client(), known_providers=["kwok"], providers=providers)  # type: ignore[arg-type]
    try:
        ev = await ActivityEnvironment().run(
            acts.evaluate_scale_down, ScaleDownEvaluationInput(cluster="c", now=time.time())
        )
    finally:
        acts.clusters.caches.close()
    assert ev.nodes == 2 and seen == [{"kwok/cx22": 0.006}]


async def test_find_orphans_reads_nodes_from_the_cache_and_returns_only_orphans(
    cluster: FakeCluster, core: client.CoreV1Api
) -> None:
    """Nodes n1 and n2 are growth's; the provider holds n1's machine and one without a Node."""

    class Machines:
        async def list_machines(self, cluster: str) -> list[ProviderMachine]:
            return [
                ProviderMachine(provider="kwok", provider_id="kwok://n1", name="n1"),
                ProviderMachine(provider="kwok", provider_id="kwok://lost", name="lost"),
            ]

    acts = ScaleDownActivities(cluster.api_client(), known_providers=["kwok"], providers={"kwok": Machines()})  # type: ignore[dict-item]
    inp = OrphanSearchInput(cluster="c", providers=["kwok"], now=time.time(), grace_s=0)
    found = await ActivityEnvironment().run(acts.find_orphans, inp)
    assert [(o.kind, o.name, o.provider_id, o.reported) for o in found] == [
        ("MachineWithoutNode", "lost", "kwok://lost", True),
        ("NodeWithoutMachine", "n2", "kwok://n2", True),
    ]
    # A node being removed loses its machine first: not an orphan.
    going = await ActivityEnvironment().run(acts.find_orphans, inp.model_copy(update={"removing": ["n2"]}))
    assert [o.name for o in going] == ["lost"]


def test_the_observation_names_the_view_an_evaluation_read_until_something_changes(
    acts: ScaleDownActivities, core: client.CoreV1Api
) -> None:
    """The loop's observation carries the token of what a scale-down evaluation reads: equal to the
    last evaluation's while nothing changed (the loop then skips it), different after a change."""
    kube = KubeActivities(acts.clusters, known_providers=["kwok"])
    rv = replicated_pod(core, "web-1", "n1")
    ev = acts.evaluate(ScaleDownEvaluationInput(cluster="c", now=time.time(), fresh={"pods": rv}))
    assert ev.view and kube.observe_cluster(ObserveInput(cluster="c")).scale_down_view == ev.view
    rv = replicated_pod(core, "web-2", "n2")
    assert kube.observe_cluster(ObserveInput(cluster="c", fresh={"pods": rv})).scale_down_view != ev.view
    # Another replica's cache (its own informers) never gives the same token.
    other = ScaleDownActivities(ClusterClients(shared=acts.clusters.api("c")), known_providers=["kwok"])
    try:
        assert other.evaluate(ScaleDownEvaluationInput(cluster="c", now=time.time())).view != ev.view
    finally:
        other.clusters.caches.close()
