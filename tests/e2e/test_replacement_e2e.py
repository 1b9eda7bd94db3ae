"""A NodeReplacement on the real stack (the Temporal dev server, the simulated cluster and its
scheduler, a growth worker): what the kube-scheduler does with pods that arrive while a successor is
being made."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.timeout(240)


def _node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    q = {"cpu": "2", "memory": "4Gi", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"providerID": f"kwok://{name}"},
        "status": {"allocatable": q, "capacity": q},
    }


async def test_a_pod_arriving_while_the_successor_is_made_stays_off_the_drifted_node(local_cluster) -> None:  # noqa: ANN001
    """old (drifted: made from an earlier spec) runs a 1200m pod that fits no other node, so its
    replacement buys a successor, Ready 4 s after it registers. A pod created meanwhile fits old (40 %
    free) and keep (25 % free, a node of no group): the scheduler prefers the emptier, old, unless old
    is tainted karpenter.sh/disrupted, as Karpenter taints a command's nodes before it launches their
    replacements. Untainted, the pod landed on old and was evicted with it (or its drain's re-check
    found no room for it in a successor sized for old's pod alone)."""
    from kubernetes import client

    from scaling.kube.drain import TAINT_DISRUPTED
    from scaling.nodes.disruption.drift import LABEL_POOL_HASH, LABEL_REPLACES
    from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
    from starters.kube import apply_node_group, deployment, node_group
    from tests.polling import until

    lc = local_cluster({"kwok": {}}, ["--node-ready-delay", "4"])
    core, apps = client.CoreV1Api(lc.api), client.AppsV1Api(lc.api)
    spec = {
        "scaleDown": {"delayAfterAdd": "1s"},
        "disruption": {"budgets": [{"nodes": "1", "reasons": ["Drifted"]}]},
    }
    apply_node_group(lc.api, node_group("g", [{"provider": "kwok", "serverType": ["cx22"], "priority": 1}], **spec))
    core.create_node(_node("old", {LABEL_GROUP: "g", LABEL_POOL: "kwok-cx22", LABEL_POOL_HASH: "an-earlier-spec"}))
    core.create_node(_node("keep", {}))

    def running_on(app: str) -> list[tuple[str, str]]:
        pods = core.list_namespaced_pod("default", label_selector=f"app={app}").items
        return [(p.metadata.uid, p.spec.node_name) for p in pods if p.status.phase == "Running"]

    async def placed(app: str, node: str) -> bool:
        return [n for _, n in running_on(app)] == [node]

    # old's pod, then keep's (each node cordoned while the other's pod starts).
    for app, cpu, on, off in (("big", "1200m", "old", "keep"), ("filler", "1500m", "keep", "old")):
        core.patch_node(off, {"spec": {"unschedulable": True}})
        apps.create_namespaced_deployment("default", deployment(app, 1, cpu=cpu, memory="64Mi"))
        await until(lambda app=app, on=on: placed(app, on), 60, f"{app} running on {on}")
        core.patch_node(off, {"spec": {"unschedulable": False}})

    handle = await lc.start_autoscaler("rep")
    try:

        async def tainted_before_any_successor() -> bool:
            try:
                taints = core.read_node("old").spec.taints or []
            except client.ApiException as e:
                if e.status == 404:
                    raise AssertionError("old was replaced and never tainted karpenter.sh/disrupted") from e
                raise
            return any(t.key == TAINT_DISRUPTED and t.effect == "NoSchedule" for t in taints)

        await until(tainted_before_any_successor, 60, "old tainted karpenter.sh/disrupted")
        successors = core.list_node(label_selector=LABEL_REPLACES).items
        assert all(
            not any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []) for n in successors
        )
        apps.create_namespaced_deployment("default", deployment("late", 1, cpu="300m", memory="64Mi"))
        (late,) = await until(lambda: running_on("late"), 60, "the late pod running")
        # keep, or the successor should it be Ready by then (a busy machine): never old
        assert late[1] != "old", late

        async def replaced() -> bool:
            names = {n.metadata.name for n in core.list_node().items}
            return "old" not in names and bool(running_on("big")) and running_on("big")[0][1] != "old"

        await until(replaced, 120, "old replaced and its pod moved")
        made = [n.metadata.name for n in core.list_node(label_selector=LABEL_REPLACES).items]
        assert len(made) == 1 and running_on("big")[0][1] == made[0]  # one successor, holding old's pod
        assert running_on("late") == [late]  # never evicted: it never was on old
        assert sorted(n.metadata.name for n in core.list_node().items) == sorted(["keep", made[0]])
    finally:
        await handle.terminate()
