"""Provider activities: create and delete machines, read catalogues. Dispatch by pool.provider."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.nodes.providers.base import NodeProvider
from scaling.nodes import contracts
from scaling.nodes.contracts import CreateNodeInput, CreateNodeResult, DeleteNodeInput
from scaling.nodes.models import ServerType


class ProviderActivities:
    def __init__(self, providers: dict[str, NodeProvider]) -> None:
        self.providers = providers

    def _provider(self, name: str) -> NodeProvider:
        try:
            return self.providers[name]
        except KeyError:
            raise ApplicationError(
                f"provider {name!r} is not configured on this worker", type="UnknownProvider", non_retryable=True
            ) from None

    @activity.defn(name=contracts.CREATE_NODE)
    async def create_node(self, inp: CreateNodeInput) -> CreateNodeResult:
        return await self._provider(inp.pool.provider).create_node(inp)

    @activity.defn(name=contracts.DELETE_NODE)
    async def delete_node(self, inp: DeleteNodeInput) -> None:
        await self._provider(inp.provider).delete_node(inp)

    @activity.defn(name=contracts.GET_CATALOGUE)
    async def get_catalogue(self, providers: list[str]) -> list[ServerType]:
        types: list[ServerType] = []
        for name in providers:
            if name in self.providers:
                types.extend(await self.providers[name].server_types())
        return types
