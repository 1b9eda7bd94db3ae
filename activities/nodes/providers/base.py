"""The one small interface every node provider implements (KWOK now, Hetzner Cloud next).

Providers are plain async classes used by activities; they never see workflow state. Secrets
(tokens, join credentials) are read by the provider from the environment or files.
"""

from __future__ import annotations

from typing import Protocol

from scaling.nodes.contracts import (
    CreateNodeInput,
    CreateNodeResult,
    DeleteNodeInput,
    ProviderMachine,
)
from scaling.nodes.models import ServerType


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

    async def list_machines(self, cluster: str) -> list[ProviderMachine]: ...
