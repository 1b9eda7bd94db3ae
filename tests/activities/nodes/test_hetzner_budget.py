"""HetznerProvider's request budget, images per architecture and spread placement groups,
against FakeHetzner over HTTP through the real hcloud client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from requests.structures import CaseInsensitiveDict
from temporalio.testing import ActivityEnvironment

import activities.nodes.providers.hetzner_budget as budget_module
from activities.nodes.providers.hetzner import HetznerProvider
from activities.nodes.providers.hetzner_budget import ProjectBudget
from scaling.nodes.contracts import CreateNodeInput
from scaling.nodes.providers.hetzner_budget import BudgetSettings, RequestKind
from sim.clouds.hetzner import FakeHetzner
from tests.activities.nodes.test_hetzner_provider import TOKEN, make_provider, pool, req, secrets  # noqa: F401


@pytest.fixture
def hz() -> Iterator[FakeHetzner]:
    with FakeHetzner(TOKEN) as sim:
        yield sim


def reqs(n: int, server_type: str = "cx32", **config: object) -> list[CreateNodeInput]:
    return [req(pool(server_type, **config), request_id=f"nodes/prod/request/r{i}") for i in range(n)]


async def test_first_try_of_a_create_costs_one_request(hz: FakeHetzner, secrets: Path) -> None:
    """In an activity's first attempt the create goes straight to the POST: no look-up first."""
    provider = make_provider(hz, secrets)
    await provider.server_types()  # the catalogue is cached; count what a create adds
    before = dict(hz.stats()["requests_by_route"])
    result = await ActivityEnvironment().run(provider.create_node, req(pool()))
    assert result.outcome == "created"
    after = hz.stats()["requests_by_route"]
    added = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    assert added == {"POST /servers": 1}


async def test_a_first_try_whose_server_exists_finds_it_instead_of_doubling(hz: FakeHetzner, secrets: Path) -> None:
    """A create of a (request, attempt) made before is refused by name and found: one server."""
    provider = make_provider(hz, secrets)
    first = await ActivityEnvironment().run(provider.create_node, req(pool()))
    again = await ActivityEnvironment().run(provider.create_node, req(pool()))
    assert again.outcome == "created" and again.provider_id == first.provider_id
    assert "name taken" in again.message
    assert len(hz.servers()) == 1


async def test_a_burst_paces_on_the_headers_without_429(secrets: Path) -> None:
    """The project's bucket is nearly empty (another tool spent it) and refills at 100x speed:
    40 concurrent creates wait for the refill instead of drawing 429s."""
    with FakeHetzner(TOKEN, rate_time_scale=100.0) as hz:
        hz.set_rate_remaining(5)
        provider = make_provider(hz, secrets)
        results = await asyncio.gather(*(ActivityEnvironment().run(provider.create_node, r) for r in reqs(40)))
        assert [r.outcome for r in results] == ["created"] * 40
        stats = hz.stats()["projects"]["default"]
        assert stats["responses_429"] == 0
        assert provider.budget.responses_429 == 0 and provider.budget.waited_s > 0


async def test_creates_go_before_listing_when_the_budget_is_short(secrets: Path) -> None:
    """With the bucket low, garbage collection's listing waits until it has refilled past its
    reserve (10% of the limit); creates started at the same time are done first."""
    with FakeHetzner(TOKEN, rate_limit_per_hour=3600, rate_time_scale=200.0) as hz:
        provider = make_provider(hz, secrets)
        hz.set_rate_remaining(10)
        await provider.server_types()  # its answers show the gate the low bucket
        done: list[str] = []

        async def create(r: CreateNodeInput) -> None:
            await ActivityEnvironment().run(provider.create_node, r)
            done.append("create")

        async def listing() -> None:
            await provider.list_machines("prod")
            done.append("list")

        await asyncio.gather(listing(), *(create(r) for r in reqs(5)))
        assert done[-1] == "list" and done.count("create") == 5
        assert hz.stats()["projects"]["default"]["responses_429"] == 0


async def test_reserve_for_other_tools_is_left_in_the_bucket(secrets: Path) -> None:
    with FakeHetzner(TOKEN, rate_time_scale=50.0) as hz:
        provider = make_provider(hz, secrets, budget=BudgetSettings(reserve_for_other_tools=3000))
        await provider.server_types()
        started = time.monotonic()
        hz.set_rate_remaining(3000)
        provider._catalogue = None
        await provider.server_types()  # sent: nothing seen of the low bucket yet
        provider._catalogue = None
        await provider.server_types()  # waits for the bucket to refill above 3,000 again
        assert time.monotonic() - started > 0.015  # at 50 a second: >= 1/50 s for one request
        assert provider.budget.waited_s > 0
        assert hz.stats()["projects"]["default"]["rate_limit_remaining"] >= 2999


async def test_images_per_architecture_from_one_pool_config(hz: FakeHetzner, secrets: Path) -> None:
    """One group mixes CAX (arm) and CX (x86): each type boots the newest snapshot of its own
    architecture matching the selector (Cluster Autoscaler's findImage order), or a name/id."""
    hz.add_snapshot({"os": "talos"}, "arm", created=time.time() - 100)
    newest_arm = hz.add_snapshot({"os": "talos"}, "arm", created=time.time() - 10)
    x86 = hz.add_snapshot({"os": "talos"}, "x86")
    provider = make_provider(hz, secrets)
    arm_result = await provider.create_node(req(pool("cax11", image="os=talos"), request_id="nodes/prod/request/a"))
    x86_result = await provider.create_node(req(pool("cx32", image="os=talos"), request_id="nodes/prod/request/b"))
    by_id = {f"hcloud://{s['id']}": s for s in hz.servers()}
    assert by_id[arm_result.provider_id]["image"]["id"] == newest_arm
    assert by_id[x86_result.provider_id]["image"]["id"] == x86
    # images_for_arch (CA's imagesForArch keys) wins over image; a name resolves per architecture.
    per_arch = {"images_for_arch": {"arm64": "debian-12", "amd64": str(x86)}, "image": "os=none"}
    c = await provider.create_node(req(pool("cax11", **per_arch), request_id="nodes/prod/request/c"))
    d = await provider.create_node(req(pool("cx22", **per_arch), request_id="nodes/prod/request/d"))
    servers = {f"hcloud://{s['id']}": s for s in hz.servers()}
    assert servers[c.provider_id]["image"]["name"] == "debian-12"
    assert servers[c.provider_id]["image"]["architecture"] == "arm"
    assert servers[d.provider_id]["image"]["id"] == x86


async def test_no_snapshot_matching_is_refused_naming_the_field(hz: FakeHetzner, secrets: Path) -> None:
    from temporalio.exceptions import ApplicationError

    hz.add_snapshot({"os": "talos"}, "x86")
    provider = make_provider(hz, secrets)
    with pytest.raises(ApplicationError) as info:
        await provider.create_node(req(pool("cax11", images_for_arch={"arm64": "os=talos"})))
    assert info.value.non_retryable and info.value.type == "HetznerInvalidConfig"
    assert "images_for_arch.arm64" in str(info.value) and "arm" in str(info.value)


async def test_spread_pool_creates_and_fills_groups_of_ten(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    results = await asyncio.gather(*(provider.create_node(r) for r in reqs(23, placement_group="spread")))
    assert [r.outcome for r in results] == ["created"] * 23
    sizes = sorted(len(g["servers"]) for g in hz.placement_groups())
    assert sizes == [3, 10, 10]
    assert all(g["type"] == "spread" for g in hz.placement_groups())
    # A second worker (a fresh provider) finds the groups by their labels and fills the open one.
    again = make_provider(hz, secrets)
    await again.create_node(req(pool(placement_group="spread"), request_id="nodes/prod/request/late"))
    assert sorted(len(g["servers"]) for g in hz.placement_groups()) == [4, 10, 10]


async def test_a_group_filled_elsewhere_is_left_for_a_new_one(hz: FakeHetzner, secrets: Path) -> None:
    """Another worker filled the group this one thought had room: the create moves on and the next
    create gets a new group."""
    provider = make_provider(hz, secrets, locations=["fsn1"])
    await provider.create_node(req(pool(placement_group="spread"), request_id="nodes/prod/request/r0"))
    other = make_provider(hz, secrets, locations=["fsn1"])
    for i in range(1, 10):
        await other.create_node(req(pool(placement_group="spread"), request_id=f"nodes/prod/request/x{i}"))
    full = await provider.create_node(req(pool(placement_group="spread"), request_id="nodes/prod/request/r1"))
    assert full.outcome == "no_capacity" and "placement_error" in full.message
    ok = await provider.create_node(req(pool(placement_group="spread"), request_id="nodes/prod/request/r2"))
    assert ok.outcome == "created"
    assert sorted(len(g["servers"]) for g in hz.placement_groups()) == [1, 10]


def test_settings_name_the_project_and_budget() -> None:
    provider = HetznerProvider.from_settings({"budget": {"rate_limit_per_hour": 7200, "reserve_for_other_tools": 500}})
    assert provider.settings.budget.rate_limit_per_hour == 7200
    with pytest.raises(ValueError, match="reserve_for_other_tools"):
        HetznerProvider.from_settings({"budget": {"reserve_for_other_tools": -1}})


async def test_a_location_out_of_capacity_is_not_asked_again_for_a_while(hz: FakeHetzner, secrets: Path) -> None:
    """A burst's later requests skip a location that just said resource_unavailable (each try
    spends budget); after capacity_memory_s it is asked again."""
    hz.set_capacity("cax11", "fsn1", 0)
    provider = make_provider(hz, secrets, capacity_memory_s=0.5)
    for i in range(3):
        result = await provider.create_node(req(pool("cax11"), request_id=f"nodes/prod/request/m{i}"))
        assert result.outcome == "created" and "nbg1" in result.message
    routes = hz.stats()["requests_by_route"]
    assert routes["POST /servers"] == 4  # fsn1 once, then nbg1 three times
    hz.set_capacity("cax11", "fsn1", None)
    deadline = time.monotonic() + 30
    while True:  # the memory expires: fsn1 is tried again
        result = await provider.create_node(req(pool("cax11"), request_id=f"nodes/prod/request/e{time.monotonic()}"))
        if "fsn1" in result.message or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert "created in fsn1" in result.message


async def test_readiness_is_one_list_for_every_booting_server(secrets: Path) -> None:
    with FakeHetzner(TOKEN, action_delay_s=1.0) as hz:
        provider = make_provider(hz, secrets)
        made = {(await provider.create_node(r)).provider_id for r in reqs(3)}
        before = hz.stats()["requests_by_route"].get("GET /servers", 0)
        assert await provider.servers_not_running("prod") == made
        assert hz.stats()["requests_by_route"]["GET /servers"] == before + 1
        deadline = time.monotonic() + 30
        while await provider.servers_not_running("prod") and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert await provider.servers_not_running("prod") == set()


async def test_calls_waiting_for_the_budget_hold_no_shared_thread(secrets: Path) -> None:
    """A budget that admits nothing keeps 40 creates waiting; the event loop's default threads
    (where the Kubernetes activities run their blocking calls) stay free meanwhile."""
    with FakeHetzner(TOKEN) as hz:
        provider = make_provider(hz, secrets, budget=BudgetSettings(reserve_for_other_tools=3600))
        await provider.list_machines("prod")  # the first request probes; its answer shows the bucket
        waiting = [asyncio.create_task(provider.create_node(r)) for r in reqs(40)]
        await asyncio.sleep(0.2)
        assert not any(t.done() for t in waiting)
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), timeout=10) == "free"
        for t in waiting:
            t.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)


def _answer(remaining: int, reset_at: float, status: int = 200) -> requests.Response:
    r = requests.Response()
    r.status_code = status
    r.headers = CaseInsensitiveDict(
        {"RateLimit-Limit": "3600", "RateLimit-Remaining": str(remaining), "RateLimit-Reset": str(int(reset_at))}
    )
    return r


def test_after_an_emptied_bucket_a_probe_measures_other_tools_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sudden drop to 0 (a 429 storm, another tool's burst) reads as others spending fast. Once
    the view is stale one request probes; its answer shows the bucket refilled and nobody else
    spending, and sends go on from there instead of waiting for the next probe."""
    clock = [1000.0]
    monkeypatch.setattr(budget_module.time, "time", lambda: clock[0])
    budget = ProjectBudget(BudgetSettings(stale_after_s=10))
    budget.acquire(RequestKind.CREATE)
    budget.release(_answer(3600, 1000))
    clock[0] = 1003.0
    budget.acquire(RequestKind.CREATE)
    budget.release(_answer(0, 1003 + 3600))  # 3,600 gone in 3 s: others spend fast
    clock[0] = 1008.0
    assert budget.delay(RequestKind.CREATE) > 0
    clock[0] = 1014.0  # stale: one request probes
    assert budget.delay(RequestKind.CREATE) == 0
    budget.acquire(RequestKind.CREATE)
    budget.release(_answer(14, 1014 + 3586))  # refilled one a second, nobody else spent
    clock[0] = 1016.0
    assert budget.delay(RequestKind.CREATE) == 0
