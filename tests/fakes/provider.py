"""FakeProvider: a NodeProvider (activities/nodes/providers/base.py) in memory, for code that talks to providers (the activities, the
collectors) without an HTTP fake behind it. Karpenter's fake cloud provider is the model: it
records every call, keeps machines by the create's key, and takes one-shot errors.
(Wire-level behaviour, the Hetzner API's own shapes and failures, is sim/clouds/hetzner.py's.)"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from scaling.kube.models import Resources
from scaling.nodes.contracts import CreateNodeInput, CreateNodeResult, DeleteNodeInput, ProviderMachine
from scaling.nodes.models import ServerType

GIB = 1 << 30


@dataclass
class FakeProvider:
    name: str = "fake"
    types: list[ServerType] = field(default_factory=list)  # empty: one small type of this provider's
    # The outcome of every create that does not find its machine (no_capacity, quota_exceeded).
    outcome: str = "created"
    calls: list[tuple[str, str]] = field(default_factory=list)  # (method, key or cluster)
    machines: dict[str, ProviderMachine] = field(default_factory=dict)  # by provider id
    # One-shot errors: the next call of that kind raises it, then it is cleared.
    next_create_error: Exception | None = None
    next_delete_error: Exception | None = None
    next_list_error: Exception | None = None

    def __post_init__(self) -> None:
        if not self.types:
            small = Resources(cpu_m=2000, memory=4 * GIB, pods=110)
            self.types = [ServerType(provider=self.name, name="small", allocatable=small, price_hourly=0.01)]

    async def server_types(self) -> list[ServerType]:
        self.calls.append(("server_types", ""))
        return list(self.types)

    async def create_node(self, inp: CreateNodeInput) -> CreateNodeResult:
        key = f"{inp.request_id}/{inp.attempt}"
        self.calls.append(("create_node", key))
        if (err := self.next_create_error) is not None:
            self.next_create_error = None
            raise err
        name = f"{inp.cluster}-{self.name}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
        provider_id = f"{self.name}://{name}"
        if provider_id in self.machines:  # the key finds the machine it made before
            return CreateNodeResult(outcome="created", node_name=name, provider_id=provider_id)
        if self.outcome != "created":
            return CreateNodeResult(outcome=self.outcome, message=f"{inp.pool.server_type}: {self.outcome}")  # type: ignore[arg-type]
        self.machines[provider_id] = ProviderMachine(
            provider=self.name, provider_id=provider_id, name=name, labels={"cluster": inp.cluster, **inp.labels}
        )
        return CreateNodeResult(outcome="created", node_name=name, provider_id=provider_id)

    async def delete_node(self, inp: DeleteNodeInput) -> None:
        self.calls.append(("delete_node", inp.provider_id or inp.node_name))
        if (err := self.next_delete_error) is not None:
            self.next_delete_error = None
            raise err
        self.machines.pop(inp.provider_id, None)  # one already gone is success

    async def list_machines(self, cluster: str) -> list[ProviderMachine]:
        self.calls.append(("list_machines", cluster))
        if (err := self.next_list_error) is not None:
            self.next_list_error = None
            raise err
        return [m for m in self.machines.values() if m.labels.get("cluster") == cluster]
