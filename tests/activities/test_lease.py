"""LeaseLock against the simulated API server: one holder at a time, a released Lease is free at
once, and a dead holder's Lease is taken over once it has not changed for its duration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from temporalio.exceptions import ApplicationError

from activities.kube.client import api_client
from activities.kube.lease import LeaseLock
from activities.settings import KubeSettings
from sim.cluster import FakeCluster


@pytest.fixture
def api(tmp_path: Path) -> Iterator[client.ApiClient]:
    with FakeCluster(node_ready_delay=0.3) as sim:
        yield api_client(KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig"))))


def holder_of(api: client.ApiClient) -> str | None:
    return client.CoordinationV1Api(api).read_namespaced_lease("l", "kube-system").spec.holder_identity


def test_one_holder_at_a_time_and_free_once_released(api: client.ApiClient) -> None:
    with LeaseLock(api, "kube-system", "l", "a"):
        assert holder_of(api) == "a"
        with pytest.raises(ApplicationError, match="held by a") as err:
            LeaseLock(api, "kube-system", "l", "b", wait_s=0.3).acquire()
        assert err.value.type == "LeaseBusy" and not err.value.non_retryable
    assert holder_of(api) == ""  # released: written empty, as client-go does
    with LeaseLock(api, "kube-system", "l", "b", wait_s=5):
        assert holder_of(api) == "b"


def test_a_dead_holders_lease_is_taken_over_after_its_duration(api: client.ApiClient) -> None:
    LeaseLock(api, "kube-system", "l", "dead", duration_s=1).acquire()  # never released
    with LeaseLock(api, "kube-system", "l", "b", wait_s=30):
        assert holder_of(api) == "b"


def test_the_same_holder_takes_its_own_lease_again(api: client.ApiClient) -> None:
    """A retried create (same request and attempt) is not locked out by its dead first try."""
    LeaseLock(api, "kube-system", "l", "r1/0", duration_s=60).acquire()
    with LeaseLock(api, "kube-system", "l", "r1/0", wait_s=1):
        assert holder_of(api) == "r1/0"
