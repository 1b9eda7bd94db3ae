"""The provider activities against FakeProvider (tests/fakes/provider.py): dispatch by the pool's
provider, the create's key reaching the provider, an unconfigured provider refused for good, and
a failing provider failing the machine list as a whole."""

from __future__ import annotations

import pytest
from kubernetes import client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.nodes.machines import MachineActivities
from activities.nodes.providers.base import NodeProvider
from activities.nodes.provisioning import ProviderActivities
from scaling.nodes.contracts import CreateNodeInput, DeleteNodeInput
from scaling.nodes.models import Pool
from tests.fakes.provider import FakeProvider


def pool(provider: str) -> Pool:
    return Pool(group="g", name=f"{provider}-small", provider=provider, server_type="small", priority=10)


def create(provider: str, request: str = "nodes/c/request/000001-abcd", attempt: int = 0) -> CreateNodeInput:
    return CreateNodeInput(cluster="c", request_id=request, attempt=attempt, pool=pool(provider))


async def test_creates_go_to_the_pools_provider_and_a_retry_finds_its_machine() -> None:
    a, b = FakeProvider(name="a"), FakeProvider(name="b")
    providers: dict[str, NodeProvider] = {"a": a, "b": b}
    acts, env = ProviderActivities(providers), ActivityEnvironment()
    first = await env.run(acts.create_node, create("b"))
    again = await env.run(acts.create_node, create("b"))  # a retried activity: the same key
    other = await env.run(acts.create_node, create("b", attempt=1))
    assert first == again and other.provider_id != first.provider_id
    assert a.calls == [] and len(b.machines) == 2
    await env.run(
        acts.delete_node, DeleteNodeInput(cluster="c", provider="b", node_name="", provider_id=first.provider_id)
    )
    assert list(b.machines) == [other.provider_id]


async def test_an_unconfigured_provider_is_refused_for_good_and_a_provider_error_surfaces() -> None:
    fake = FakeProvider(name="a")
    acts, env = ProviderActivities({"a": fake}), ActivityEnvironment()
    with pytest.raises(ApplicationError) as err:
        await env.run(acts.create_node, create("hetzner"))
    assert err.value.type == "UnknownProvider" and err.value.non_retryable and "'hetzner'" in str(err.value)
    fake.next_create_error = RuntimeError("rate limited")
    with pytest.raises(RuntimeError, match="rate limited"):
        await env.run(acts.create_node, create("a"))
    assert (await env.run(acts.create_node, create("a"))).outcome == "created"  # the error was one-shot
    fake.outcome = "no_capacity"
    assert (await env.run(acts.create_node, create("a", attempt=1))).outcome == "no_capacity"


async def test_the_catalogue_lists_only_configured_providers_in_the_order_asked() -> None:
    acts = ProviderActivities({"a": FakeProvider(name="a"), "b": FakeProvider(name="b")})
    types = await ActivityEnvironment().run(acts.get_catalogue, ["b", "missing", "a"])
    assert [(t.provider, t.name) for t in types] == [("b", "small"), ("a", "small")]


async def test_a_failing_provider_fails_the_machine_list_instead_of_a_partial_one() -> None:
    """A leak is judged on the whole list: a provider missing from it would make live machines of
    the others look like the only ones."""
    a, b = FakeProvider(name="a"), FakeProvider(name="b")
    acts = MachineActivities(client.ApiClient(), {"a": a, "b": b})
    env = ActivityEnvironment()
    await a.create_node(create("a"))
    await b.create_node(create("b"))
    listed = await env.run(acts.list_provider_machines, "c")
    assert sorted(m.provider for m in listed) == ["a", "b"]
    assert await env.run(acts.list_provider_machines, "other") == []
    b.next_list_error = ConnectionError("b unreachable")
    with pytest.raises(ConnectionError):
        await env.run(acts.list_provider_machines, "c")
