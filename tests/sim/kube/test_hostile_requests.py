"""The emulated API server as kube-apiserver answers what a careless or hostile client sends:
dryRun=All validates and stores nothing (staging/src/k8s.io/apiserver/pkg/endpoints/handlers:
a dry-run write is answered as if stored), a body over --max-request-body-bytes (3 MiB) is 413
RequestEntityTooLarge, and each cluster's kubeconfig names its context, cluster and user after
it so two of them merge."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from sim.cluster import FakeCluster
from sim.kube.apiserver import MAX_REQUEST_BODY_BYTES
from tests.sim.conftest import pod_body


@pytest.fixture
def still() -> Iterator[FakeCluster]:
    """A cluster where only requests write (no scheduler, KWOK or controllers)."""
    with FakeCluster(run_scheduler=False, run_kwok=False, run_controllers=False) as sim:
        yield sim


def test_dry_run_all_validates_answers_and_stores_nothing(still: FakeCluster) -> None:
    cluster, api = still, still.api_client()
    core = client.CoreV1Api(api)
    rv_before = cluster.store.rv
    pod, code, _ = core.create_namespaced_pod_with_http_info("default", pod_body("dry"), dry_run="All")
    assert code == 201 and pod.metadata.name == "dry" and pod.metadata.uid
    assert pod.status.phase == "Pending"  # defaulted as a real create is
    with pytest.raises(ApiException) as info:
        core.read_namespaced_pod("dry", "default")
    assert info.value.status == 404
    with pytest.raises(ApiException) as info:  # still validated
        core.create_namespaced_pod("default", {"metadata": {"name": "Bad_Name"}, "spec": {"containers": []}}, dry_run="All")  # fmt: skip
    assert info.value.status == 422
    core.create_namespaced_pod("default", pod_body("real"))
    rv = cluster.store.rv
    core.patch_namespaced_pod("real", "default", {"metadata": {"labels": {"a": "b"}}}, dry_run="All")
    core.delete_namespaced_pod("real", "default", dry_run="All")
    got = core.read_namespaced_pod("real", "default")
    assert got.metadata.labels in (None, {}) and cluster.store.rv == rv
    assert rv == rv_before + 1  # only the real create moved the resourceVersion
    with pytest.raises(ApiException) as info:
        core.delete_namespaced_pod("real", "default", dry_run="Some")
    assert info.value.status == 400
    api.close()


def test_a_body_over_three_mebibytes_is_413_unread(cluster: FakeCluster) -> None:
    huge = pod_body("huge")
    huge["metadata"]["annotations"] = {"blob": "x" * (MAX_REQUEST_BODY_BYTES + 1)}
    request = urllib.request.Request(
        cluster.url + "/api/v1/namespaces/default/pods",
        data=json.dumps(huge).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {cluster.token}"},
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10, context=cluster.ssl_context())
    assert info.value.code == 413
    status = json.loads(info.value.read())
    assert status["reason"] == "RequestEntityTooLarge"
    assert status["message"] == f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}"
    assert cluster.store.find(cluster.store.builtin("pods"), "default", "huge") is None


def test_two_kubeconfigs_merge(tmp_path: Path) -> None:
    with (
        FakeCluster(name="alpha", run_scheduler=False, run_kwok=False) as a,
        FakeCluster(run_scheduler=False, run_kwok=False) as b,
    ):
        pa, pb = a.write_kubeconfig(tmp_path / "a"), b.write_kubeconfig(tmp_path / "b")
        assert yaml.safe_load(pa.read_text())["current-context"] == "alpha"
        assert b.name == f"sim-{b.url.rsplit(':', 1)[1]}"
        merged = f"{pa}:{pb}"  # as KUBECONFIG=a:b
        contexts, _ = config.list_kube_config_contexts(config_file=merged)
        names = {c["name"]: c["context"] for c in contexts}
        assert names == {"alpha": {"cluster": "alpha", "user": "alpha", "namespace": "default"},
                         b.name: {"cluster": b.name, "user": b.name, "namespace": "default"}}  # fmt: skip
        for ctx, want in (("alpha", a), (b.name, b)):
            api = config.new_client_from_config(config_file=merged, context=ctx)
            assert api.configuration.host == want.url
            api.close()
