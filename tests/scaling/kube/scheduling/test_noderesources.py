"""NodeResourcesFit, ported from kubernetes/kubernetes
pkg/scheduler/framework/plugins/noderesources/fit_test.go (TestEnoughRequests): each case names
the upstream case (amounts scaled to growth's units: cpu millicores, bytes)."""

from __future__ import annotations

from typing import Any

import pytest

from scaling.kube.models import NodeInfo, Resources
from scaling.kube.pods import pod_demand
from scaling.kube.scheduling import noderesources

# upstream's node: 10 cpu, 20 memory, 32 pods, 5 example.com/aaa, 2 hugepages-2Mi; cpu here in
# cores and memory in GiB, so growth's minimums for pods that request nothing stay out of the way
GI = 2**30
NODE_ALLOC = Resources(cpu_m=10_000, memory=20 * GI, pods=32, extended=(("example.com/aaa", 5), ("hugepages-2Mi", 2)))
AAA, BBB, HUGE = "example.com/aaa", "example.com/bbb", "hugepages-2Mi"


def c(cpu: int = 0, mem: int = 0, extended: dict[str, int] | None = None) -> dict[str, Any]:
    req: dict[str, Any] = {}
    if cpu:
        req["cpu"] = str(cpu)
    if mem:
        req["memory"] = f"{mem}Gi"
    req.update({k: str(v) for k, v in (extended or {}).items()})
    return {"name": "c", "resources": {"requests": req}}


def pod(containers: list[dict], init: list[dict] | None = None, overhead: dict | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    return {"metadata": {"name": "p"}, "spec": spec}


def node(cpu: int, mem: int, extended: dict[str, int] | None = None) -> NodeInfo:
    used = Resources(cpu_m=cpu * 1000, memory=mem * GI, extended=tuple(sorted((extended or {}).items())))
    return NodeInfo(name="n", allocatable=NODE_ALLOC, requested=used)


CASES = [
    ("too many resources fails", pod([c(1, 1)]), node(10, 20), "Insufficient cpu"),
    ("too many resources fails due to init container cpu", pod([c(1, 1)], [c(3, 1)]), node(8, 19), "Insufficient cpu"),
    (
        "too many resources fails due to highest init container cpu",
        pod([c(1, 1)], [c(3, 1), c(2, 1)]),
        node(8, 19),
        "Insufficient cpu",
    ),
    (
        "too many resources fails due to init container memory",
        pod([c(1, 1)], [c(1, 3)]),
        node(9, 19),
        "Insufficient memory",
    ),
    (
        "init container fits because it's the max, not sum, of containers and init containers",
        pod([c(1, 1)], [c(1, 1), c(1, 1)]),
        node(9, 19),
        None,
    ),
    ("both resources fit", pod([c(1, 1)]), node(5, 5), None),
    ("one resource memory fits", pod([c(2, 1)]), node(9, 5), "Insufficient cpu"),
    ("one resource cpu fits", pod([c(1, 2)]), node(5, 19), "Insufficient memory"),
    ("equal edge case", pod([c(5, 1)]), node(5, 19), None),
    ("extended resource fits", pod([c(extended={AAA: 1})]), node(0, 0), None),
    ("extended resource capacity enforced", pod([c(extended={AAA: 10})]), node(0, 0), "Insufficient example.com/aaa"),
    (
        "extended resource allocatable enforced",
        pod([c(extended={AAA: 1})]),
        node(0, 0, {AAA: 5}),
        "Insufficient example.com/aaa",
    ),
    (
        "extended resource allocatable enforced for unknown resource",
        pod([c(extended={BBB: 1})]),
        node(0, 0),
        "Insufficient example.com/bbb",
    ),
    ("hugepages resource capacity enforced", pod([c(extended={HUGE: 10})]), node(0, 0), "Insufficient hugepages-2Mi"),
    (
        "hugepages resource allocatable enforced for multiple containers",
        pod([c(extended={HUGE: 1}), c(extended={HUGE: 1})]),
        node(0, 0, {HUGE: 1}),
        "Insufficient hugepages-2Mi",
    ),
    (
        "extended resource allocatable enforced for init container",
        pod([c()], [c(extended={AAA: 10})]),
        node(0, 0),
        "Insufficient example.com/aaa",
    ),
    # restartable (sidecar) init containers run beside the app: they add, where plain ones take the max
    (
        "sidecar init containers add to the app containers",
        pod([c(2, 1)], [{**c(3, 1), "restartPolicy": "Always"}]),
        node(6, 0),
        "Insufficient cpu",
    ),
    (
        "an init container after a sidecar counts with it",
        pod([c(1, 1)], [{**c(2, 1), "restartPolicy": "Always"}, c(5, 1)]),
        node(3, 0),
        None,
    ),
    (
        "an init container after a sidecar counts with it, refused",
        pod([c(1, 1)], [{**c(2, 1), "restartPolicy": "Always"}, c(6, 1)]),
        node(3, 0),
        "Insufficient cpu",
    ),
    ("pod overhead is added", pod([c(1, 1)], overhead={"cpu": "2"}), node(8, 0), "Insufficient cpu"),
]


@pytest.mark.parametrize(("name", "p", "n", "want"), CASES, ids=[x[0][:60] for x in CASES])
def test_enough_requests(name: str, p: dict, n: NodeInfo, want: str | None) -> None:
    r = noderesources.filter(pod_demand(p), n)
    assert (None if r is None else r.reason) == want


def test_too_many_pods() -> None:
    n = NodeInfo(name="n", allocatable=NODE_ALLOC, requested=Resources(pods=32))
    assert noderesources.filter(Resources(cpu_m=1, memory=1, pods=1), n).reason == "Too many pods"
