"""scaling.kube.pods.pod_info_rebound: a pod's PodInfo carried over a change of its binding or
status is the PodInfo made afresh; any other change makes it afresh (activities/kube/cache.py's
PodIndex keeps the carried one)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.kube.pods import pod_info, pod_info_rebound

PENDING = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "lastTransitionTime": "2026-11-30T10:00:00Z",
}


def base_pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "uid": "u1",
            "resourceVersion": "10",
            "labels": {"app": "web"},
            "annotations": {"a": "1"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "rs1", "controller": True}],
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}},
                    "ports": [{"hostPort": 8080}],
                }
            ],
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
                    ]
                }
            },
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
        "status": {"phase": "Pending"},
    }


# Changes of the binding and the status (a burst's: marked unschedulable, bound, running, failed).
STATUS_CHANGES = {
    "unschedulable": lambda p: p.setdefault("status", {}).update(conditions=[PENDING]),
    "bound": lambda p: p["spec"].update(nodeName="n1"),
    "unbound": lambda p: p["spec"].pop("nodeName", None),
    "running": lambda p: p.setdefault("status", {}).update(
        phase="Running", conditions=[{"type": "Ready", "status": "True"}]
    ),
    "failed": lambda p: p.setdefault("status", {}).update(phase="Failed"),
    "no status": lambda p: p.pop("status", None),
    "resource version": lambda p: p["metadata"].update(resourceVersion="11"),
}
# Changes of what else pod_info reads.
OTHER_CHANGES = {
    "labels": lambda p: p["metadata"].update(labels={"app": "api"}),
    "annotation": lambda p: p["metadata"]["annotations"].update({"kubernetes.io/config.mirror": "x"}),
    "owner": lambda p: p["metadata"].update(ownerReferences=[{"kind": "DaemonSet", "name": "d", "controller": True}]),
    "deleting": lambda p: p["metadata"].update(deletionTimestamp="2026-11-30T10:05:00Z"),
    "requests": lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="500m"),
    "toleration gone": lambda p: p["spec"].pop("tolerations", None),
    "spec key": lambda p: p["spec"].update(schedulerName="other"),
    "grace": lambda p: p["spec"].update(terminationGracePeriodSeconds=5),
}


def changed(pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    for name in names:
        (STATUS_CHANGES | OTHER_CHANGES)[name](out)
    return out


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    st.lists(st.sampled_from(sorted(STATUS_CHANGES)), max_size=4),
    st.lists(st.sampled_from(sorted(STATUS_CHANGES | OTHER_CHANGES)), max_size=4),
)
def test_a_carried_pod_info_is_the_one_made_afresh(before: list[str], after: list[str]) -> None:
    old = changed(base_pod(), before)
    new = changed(old, after)
    carried = pod_info_rebound(pod_info(old), old, new)
    if all(name in STATUS_CHANGES for name in after):
        assert carried is not None, after
    if carried is not None:
        assert carried == pod_info(new), after


def test_a_burst_pods_changes_carry_it_over() -> None:
    created = base_pod()
    marked = changed(created, ["unschedulable"])
    bound = changed(marked, ["bound"])
    running = changed(bound, ["running"])
    info = pod_info(created)
    for old, new in ((created, marked), (marked, bound), (bound, running)):
        info = pod_info_rebound(info, old, new)
        assert info == pod_info(new)
    assert (info.node_name, info.phase, info.unschedulable) == ("n1", "Running", False)
    for name in OTHER_CHANGES:
        assert pod_info_rebound(pod_info(running), running, changed(running, [name])) is None, name
