"""A short critical section shared by every worker, held in a coordination.k8s.io/v1 Lease.

Why a Lease: a limit that must hold across worker processes (the KWOK provider's per-pool
capacity: count the pool's nodes, then create one) needs one place every worker sees, and in a
cluster that is the API server. Kubernetes' own components serialise there the same way:
client-go's leader election (kube-controller-manager, kube-scheduler, Cluster Autoscaler) holds
a Lease, taken by create or by an update carrying the resourceVersion it read, so two takers
cannot both win (the second gets 409 Conflict). A lock per process held in 5 of 15 tries that
two workers creating at the same instant exceeded a limit of 3 (issue 20).

As in client-go, a holder's Lease is taken over only when it has not changed for its
leaseDurationSeconds as measured on this worker's own clock (no trust in another host's clock),
so a worker that died inside the section delays the others by that long, once. Release writes an
empty holder, as client-go's ReleaseOnCancel does.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import WORKER_SHUTDOWN

# The section is a list and a create (tens of ms); a holder that takes longer than this is dead.
LEASE_DURATION_S = 10
# Waiters re-read the Lease this often (with jitter, so they do not take turns in lockstep).
RETRY_S = (0.02, 0.1)
# How long one activity attempt waits for the Lease before it fails (retryable).
WAIT_S = 60.0


class LeaseLock:
    """`with LeaseLock(api, namespace, name, holder):` runs the body while `holder` holds the Lease."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        holder: str,
        duration_s: int = LEASE_DURATION_S,
        wait_s: float = WAIT_S,
    ) -> None:
        self.coord = client.CoordinationV1Api(api)
        self.namespace, self.name, self.holder = namespace, name, holder
        self.duration_s, self.wait_s = duration_s, wait_s
        self._version: str | None = None  # resourceVersion of our own write while we hold it

    def __enter__(self) -> LeaseLock:
        self.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()

    def _body(self, holder: str, version: str | None = None, acquired: datetime | None = None) -> dict[str, Any]:
        now = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if version is not None:
            meta["resourceVersion"] = version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": self.duration_s,
                "acquireTime": now,
                "renewTime": now,
            },
        }

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait_s
        seen: tuple[str, float] | None = None  # (resourceVersion, when this worker first saw it)
        while True:
            try:
                created = self.coord.create_namespaced_lease(self.namespace, self._body(self.holder))
                self._version = created.metadata.resource_version
                return
            except ApiException as e:
                if e.status != 409:
                    raise
            try:
                lease = self.coord.read_namespaced_lease(self.name, self.namespace)
            except ApiException as e:
                if e.status == 404:  # released and deleted in between: create again
                    continue
                raise
            version = lease.metadata.resource_version
            if seen is None or seen[0] != version:
                seen = (version, time.monotonic())
            spec = lease.spec
            holder = spec.holder_identity if spec else None
            duration = (spec.lease_duration_seconds if spec else None) or self.duration_s
            if not holder or holder == self.holder or time.monotonic() - seen[1] >= duration:
                try:
                    taken = self.coord.replace_namespaced_lease(
                        self.name, self.namespace, self._body(self.holder, version)
                    )
                    self._version = taken.metadata.resource_version
                    return
                except ApiException as e:
                    if e.status != 409:  # 409: another worker took it first
                        raise
            if activity.in_activity() and activity.is_worker_shutdown():
                # Waiting holds nothing: hand the activity to another worker at once.
                raise ApplicationError("worker shutting down while waiting for a lease", type=WORKER_SHUTDOWN)
            if time.monotonic() >= deadline:
                raise ApplicationError(
                    f"lease {self.namespace}/{self.name} held by {holder} for over {self.wait_s:.0f}s",
                    type="LeaseBusy",
                )
            time.sleep(random.uniform(*RETRY_S))

    def release(self) -> None:
        if self._version is None:
            return
        try:
            self.coord.replace_namespaced_lease(self.name, self.namespace, self._body("", self._version))
        except ApiException as e:
            # 409: held so long that another worker took it over; 404: deleted. Either way not ours.
            if e.status not in (404, 409):
                raise
        finally:
            self._version = None
