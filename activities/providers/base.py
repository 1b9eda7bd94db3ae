"""The one small interface every node provider implements (KWOK now, Hetzner Cloud next).

Providers are plain async classes used by activities; they never see workflow state. Secrets
(tokens, join credentials) are read by the provider from the environment or files.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, Field

from scaling.models import Pool, ServerType, Taint


class CreateNodeInput(BaseModel):
    cluster: str
    request_id: str  # the NodeRequest workflow id: the idempotency key at the provider
    attempt: int  # attempt number within the request; with request_id names the machine
    pool: Pool
    labels: dict[str, str] = Field(default_factory=dict)  # group labels + growth's own labels
    taints: list[Taint] = Field(default_factory=list)


class CreateNodeResult(BaseModel):
    outcome: Literal["created", "no_capacity", "quota_exceeded"]
    node_name: str = ""
    provider_id: str = ""
    message: str = ""


class DeleteNodeInput(BaseModel):
    cluster: str
    provider: str
    node_name: str
    provider_id: str = ""


class ProviderMachine(BaseModel):
    """A machine the provider holds for this cluster (for leak detection / orphan reports)."""

    provider: str
    provider_id: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    created_at: float | None = None


class NodeProvider(Protocol):
    name: str

    async def server_types(self) -> list[ServerType]:
        """The catalogue the planner may choose from (allocatable after system reserve)."""
        ...

    async def create_node(self, inp: CreateNodeInput) -> CreateNodeResult:
        """Create (or find, if it already exists for inp.request_id/attempt) one machine."""
        ...

    async def delete_node(self, inp: DeleteNodeInput) -> None:
        """Delete the machine; deleting one already gone is success."""
        ...

    async def list_machines(self, cluster: str) -> list[ProviderMachine]:
        ...
