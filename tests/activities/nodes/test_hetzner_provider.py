"""HetznerProvider against FakeHetzner over HTTP, through the real hcloud client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from activities.nodes.providers.hetzner import LABEL_ATTEMPT, HetznerProvider, HetznerSettings
from scaling.kube.labels import request_key
from scaling.kube.models import Taint
from scaling.nodes.contracts import CreateNodeInput, DeleteNodeInput
from scaling.nodes.gc.leaks import find_leaked_machines
from scaling.nodes.models import LABEL_CLUSTER, LABEL_REQUEST, Pool
from sim.clouds.hetzner import FakeHetzner, parse_kubelet_user_data

TOKEN = "test-token"
JOIN = "abcdef.0123456789abcdef"


@pytest.fixture
def hz() -> Iterator[FakeHetzner]:
    with FakeHetzner(TOKEN) as sim:
        yield sim


@pytest.fixture
def secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Token in the environment, join token in a file: never in workflow inputs."""
    monkeypatch.setenv("HCLOUD_TOKEN", TOKEN)
    join = tmp_path / "join-token"
    join.write_text(JOIN + "\n")
    monkeypatch.setenv("GROWTH_JOIN_ENDPOINT", "10.0.0.1:6443")
    return join


def make_provider(hz: FakeHetzner, secrets: Path, **overrides: object) -> HetznerProvider:
    settings = HetznerSettings(
        api_endpoint=hz.url,
        join_token_file=str(secrets),
        locations=["fsn1", "nbg1", "hel1"],
        poll_interval_s=0.01,
        retry_base_s=0.01,
        retry_cap_s=0.05,
        timeout_s=2.0,
    )
    return HetznerProvider(settings, **overrides)


def pool(server_type: str = "cx32", **config: object) -> Pool:
    return Pool(
        group="workers",
        name=f"hetzner-{server_type}",
        provider="hetzner",
        server_type=server_type.upper(),
        priority=50,
        config=dict(config),
    )


def req(p: Pool, request_id: str = "nodes/prod/request/r1", attempt: int = 1) -> CreateNodeInput:
    return CreateNodeInput(
        cluster="prod",
        request_id=request_id,
        attempt=attempt,
        pool=p,
        labels={"team": "data", LABEL_REQUEST: request_id},
        taints=[Taint(key="dedicated", value="data", effect="NoSchedule")],
    )


async def test_create_names_labels_and_user_data(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    result = await provider.create_node(req(pool("cax11")))
    assert result.outcome == "created"
    [server] = hz.servers()
    assert result.node_name == server["name"]
    assert result.provider_id == f"hcloud://{server['id']}"
    assert server["server_type"]["name"] == "cax11"
    assert server["location"]["name"] == "fsn1"
    labels = server["labels"]
    assert labels[LABEL_CLUSTER] == "prod"
    assert labels[LABEL_REQUEST] == request_key("nodes/prod/request/r1")
    assert "/" not in labels[LABEL_REQUEST]
    assert labels[LABEL_ATTEMPT] == "1"
    token, node_labels, taints = parse_kubelet_user_data(hz.server_user_data(server["id"]))
    assert token == JOIN
    assert node_labels["team"] == "data"
    assert node_labels["kubernetes.io/arch"] == "arm64"
    assert node_labels["topology.kubernetes.io/region"] == "fsn1"  # the location, as hcloud's CCM sets it
    assert node_labels[LABEL_REQUEST] == request_key("nodes/prod/request/r1")
    assert taints == [{"key": "dedicated", "value": "data", "effect": "NoSchedule"}]
    assert JOIN not in str(req(pool("cax11")).model_dump())


async def test_resource_unavailable_falls_back_across_locations(hz: FakeHetzner, secrets: Path) -> None:
    hz.set_capacity("cx32", "fsn1", 0)
    hz.set_capacity("cx32", "nbg1", 0)
    provider = make_provider(hz, secrets)
    result = await provider.create_node(req(pool()))
    assert result.outcome == "created"
    assert hz.servers()[0]["location"]["name"] == "hel1"
    # The node registers labelled with the location it was created in, not the first tried.
    _, node_labels, _ = parse_kubelet_user_data(hz.server_user_data(hz.servers()[0]["id"]))
    assert node_labels["topology.kubernetes.io/region"] == "hel1"


async def test_no_capacity_anywhere_reports_no_capacity(hz: FakeHetzner, secrets: Path) -> None:
    for loc in ("fsn1", "nbg1", "hel1"):
        hz.set_capacity("cx32", loc, 0)
    hz.inject_fault("placement_error", 1, method="POST", path="/servers")
    provider = make_provider(hz, secrets)
    result = await provider.create_node(req(pool()))
    assert result.outcome == "no_capacity"
    assert "fsn1: placement_error" in result.message and "hel1: resource_unavailable" in result.message
    assert hz.servers() == []


async def test_pool_config_locations_are_tried_in_its_order(hz: FakeHetzner, secrets: Path) -> None:
    hz.set_capacity("cx32", "hel1", 0)
    provider = make_provider(hz, secrets)
    result = await provider.create_node(req(pool(locations=["hel1", "nbg1"], image="debian-12")))
    assert result.outcome == "created"
    [server] = hz.servers()
    assert server["location"]["name"] == "nbg1"
    assert server["image"]["name"] == "debian-12"


async def test_quota_is_quota_exceeded(hz: FakeHetzner, secrets: Path) -> None:
    hz.set_server_limit(0)
    provider = make_provider(hz, secrets)
    result = await provider.create_node(req(pool()))
    assert result.outcome == "quota_exceeded"
    assert "resource_limit_exceeded" in result.message
    # Quota is project-wide: only one create was tried, not one per location.
    assert hz.stats()["requests_by_route"]["POST /servers"] == 1


async def test_rate_limit_storm_absorbed_by_client_retries(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    hz.rate_limit_storm(3, reset_in_s=5)
    result = await provider.create_node(req(pool()))
    assert result.outcome == "created"
    assert len(hz.servers()) == 1


async def test_rate_limit_storm_surfaces_retryable_with_reset_delay(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets, retry_max_retries=2)
    hz.rate_limit_storm(100, reset_in_s=120)
    with pytest.raises(ApplicationError) as info:
        await provider.create_node(req(pool()))
    err = info.value
    assert err.type == "HetznerRateLimited"
    assert not err.non_retryable
    assert err.next_retry_delay is not None
    assert timedelta(seconds=100) < err.next_retry_delay <= timedelta(seconds=121)
    assert provider.last_rate_limit_remaining == 0


async def test_invalid_token_is_non_retryable(hz: FakeHetzner, secrets: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HCLOUD_TOKEN", "wrong")
    provider = make_provider(hz, secrets)
    with pytest.raises(ApplicationError) as info:
        await provider.create_node(req(pool()))
    assert info.value.type == "InvalidToken"
    assert info.value.non_retryable
    assert "token" in str(info.value) and "401" in str(info.value)
    with pytest.raises(ApplicationError) as info2:
        await provider.server_types()
    assert info2.value.type == "InvalidToken"


async def test_token_from_file(hz: FakeHetzner, secrets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HCLOUD_TOKEN")
    token_file = tmp_path / "hcloud-token"
    token_file.write_text(TOKEN)
    provider = make_provider(hz, secrets, token_file=str(token_file))
    assert {t.name for t in await provider.server_types()} >= {"cx32", "cax11"}


async def test_missing_token_says_so(hz: FakeHetzner, secrets: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HCLOUD_TOKEN")
    provider = make_provider(hz, secrets)
    with pytest.raises(ApplicationError) as info:
        await provider.list_machines("prod")
    assert info.value.type == "InvalidToken" and info.value.non_retryable
    assert "HCLOUD_TOKEN" in str(info.value)
    assert hz.stats()["requests"] == 0


async def test_replayed_create_finds_first_server(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    first = await provider.create_node(req(pool()))
    second = await make_provider(hz, secrets).create_node(req(pool()))
    assert second == first.model_copy(update={"message": second.message})
    assert len(hz.servers()) == 1
    third = await provider.create_node(req(pool(), attempt=2))
    assert third.provider_id != first.provider_id
    assert len(hz.servers()) == 2


async def test_dropped_create_response_recovers_the_first_server(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    hz.lose_create_responses(1, mode="drop")
    result = await provider.create_node(req(pool()))
    assert result.outcome == "created"
    assert "lost" in result.message
    [server] = hz.servers()
    assert result.provider_id == f"hcloud://{server['id']}"
    assert hz.stats()["created_total"] == 1


async def test_timed_out_create_retried_by_client_finds_first_server(hz: FakeHetzner, secrets: Path) -> None:
    # The answer arrives after the client's timeout: hcloud re-sends the POST, which hits
    # uniqueness_error on the name; the provider then finds the server the first POST made.
    # The first answer is held well past the client's timeout; the timeout itself is long enough
    # for the other calls to answer in time on a busy machine.
    provider = make_provider(hz, secrets, timeout_s=1.5)
    hz.lose_create_responses(1, mode="delay", delay_s=4.0)
    result = await provider.create_node(req(pool()))
    assert result.outcome == "created"
    assert len(hz.servers()) == 1
    assert hz.stats()["requests_by_route"]["POST /servers"] == 2
    # And a later activity retry of the same attempt still finds exactly that one.
    again = await provider.create_node(req(pool()))
    assert again.provider_id == result.provider_id
    assert hz.stats()["created_total"] == 1


async def test_create_answered_502_after_it_was_made_finds_the_server(hz: FakeHetzner, secrets: Path) -> None:
    # A proxy's 502 though the backend created it: hcloud re-sends the POST (its retry policy
    # covers bad_gateway), which hits uniqueness_error on the name; the provider finds the first.
    provider = make_provider(hz, secrets)
    hz.lose_create_responses(1, mode="error", code="bad_gateway")
    result = await provider.create_node(req(pool()))
    assert result.outcome == "created" and "name taken" in result.message
    [server] = hz.servers()
    assert result.provider_id == f"hcloud://{server['id']}"
    assert hz.stats()["created_total"] == 1


async def test_create_answered_500_after_it_was_made_retry_finds_the_server(hz: FakeHetzner, secrets: Path) -> None:
    # A backend 500 after the commit: the activity fails retryably; its retry looks before it
    # creates and returns the server the first try made.
    provider = make_provider(hz, secrets)
    hz.lose_create_responses(1, mode="error", code="server_error")
    with pytest.raises(ApplicationError) as info:
        await provider.create_node(req(pool()))
    assert info.value.type == "HetznerUnavailable" and not info.value.non_retryable
    again = await provider.create_node(req(pool()))
    [server] = hz.servers()
    assert again.outcome == "created" and again.provider_id == f"hcloud://{server['id']}"
    assert hz.stats()["created_total"] == 1


async def test_transient_5xx_is_retryable_error(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    await provider.server_types()  # warm the catalogue cache
    hz.inject_fault("server_error", 1, method="POST", path="/servers")
    with pytest.raises(ApplicationError) as info:
        await provider.create_node(req(pool()))
    assert info.value.type == "HetznerUnavailable" and not info.value.non_retryable
    hz.inject_fault("bad_gateway", 2, method="POST", path="/servers")  # hcloud retries these
    assert (await provider.create_node(req(pool()))).outcome == "created"


async def test_delete_is_idempotent(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    created = await provider.create_node(req(pool()))
    inp = DeleteNodeInput(
        cluster="prod", provider="hetzner", node_name=created.node_name, provider_id=created.provider_id
    )
    await provider.delete_node(inp)
    assert hz.servers() == []
    await provider.delete_node(inp)  # 404 = already done
    await provider.delete_node(inp.model_copy(update={"provider_id": ""}))  # by name, gone


async def test_delete_by_name_spares_other_clusters(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    created = await provider.create_node(req(pool()))
    await provider.delete_node(DeleteNodeInput(cluster="staging", provider="hetzner", node_name=created.node_name))
    assert len(hz.servers()) == 1
    await provider.delete_node(DeleteNodeInput(cluster="prod", provider="hetzner", node_name=created.node_name))
    assert hz.servers() == []


async def test_server_types_catalogue_is_cached(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    types = {t.name: t for t in await provider.server_types()}
    cx32, cax11 = types["cx32"], types["cax11"]
    assert cx32.provider == "hetzner" and cx32.arch == "amd64" and cax11.arch == "arm64"
    assert cx32.allocatable.cpu_m == 4000 - 200
    assert cx32.allocatable.memory == 8 * 1024**3 - 512 * 1024**2
    assert cx32.price_hourly == pytest.approx(0.0104)
    before = hz.stats()["requests"]
    for _ in range(5):
        await provider.server_types()
    assert hz.stats()["requests"] == before


async def test_removed_or_deprecated_type_makes_only_its_pool_unusable(hz: FakeHetzner, secrets: Path) -> None:
    hz.remove_server_type("cx31")
    hz.deprecate_server_type("cx22")
    provider = make_provider(hz, secrets)
    names = {t.name for t in await provider.server_types()}
    assert "cx31" not in names and "cx22" not in names
    assert {"cx32", "cx33", "cax11"} <= names
    problems = await provider.unusable_types(wanted=["CX31", "CX32"])
    assert "not offered" in problems["cx31"]
    assert "deprecated" in problems["cx22"]
    assert "cx32" not in problems
    gone = await provider.create_node(req(pool("cx31")))
    assert gone.outcome == "no_capacity" and "cx31" in gone.message
    assert (await provider.create_node(req(pool("cx32"), request_id="r2"))).outcome == "created"
    assert "POST /servers" in hz.stats()["requests_by_route"]
    assert hz.stats()["requests_by_route"]["POST /servers"] == 1


async def test_deprecated_in_future_allowed_when_configured(hz: FakeHetzner, secrets: Path) -> None:
    hz.deprecate_server_type("cx31", unavailable_after="2999-01-01T00:00:00Z")
    provider = make_provider(hz, secrets, allow_deprecated=True)
    types = {t.name: t for t in await provider.server_types()}
    assert types["cx31"].deprecated
    assert (await provider.create_node(req(pool("cx31")))).outcome == "created"


async def test_list_machines_and_leak_detection(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    live = await provider.create_node(req(pool(), request_id="nodes/prod/request/live"))
    joined = await provider.create_node(req(pool(), request_id="nodes/prod/request/done"))
    leaked = await provider.create_node(req(pool(), request_id="nodes/prod/request/gone"))
    other = await make_provider(hz, secrets).create_node(
        req(pool(), request_id="x").model_copy(update={"cluster": "staging"})
    )
    machines = await provider.list_machines("prod")
    assert {m.provider_id for m in machines} == {live.provider_id, joined.provider_id, leaked.provider_id}
    assert other.provider_id not in {m.provider_id for m in machines}
    now = time.time()
    found = find_leaked_machines(
        machines,
        live_request_ids={"nodes/prod/request/live"},
        node_provider_ids={joined.provider_id},
        now=now + 600,
        grace_s=300,
    )
    assert [m.provider_id for m in found] == [leaked.provider_id]
    assert find_leaked_machines(machines, {"nodes/prod/request/live"}, {joined.provider_id}, now, 300) == []


async def test_request_budget_of_a_create(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    await provider.server_types()
    before = hz.stats()["requests"]
    await provider.create_node(req(pool()))
    # One idempotency lookup and one POST; no action polling.
    assert hz.stats()["requests"] - before == 2
    assert provider.request_count == hz.stats()["requests"]


async def test_created_server_joins_sim_cluster_as_labelled_node(secrets: Path) -> None:
    """Provider → fake Hetzner → cloud-init user data → Node in the simulated cluster."""
    import asyncio
    import json
    import urllib.error
    import urllib.request

    cluster_mod = pytest.importorskip("sim.cluster")
    with (
        cluster_mod.FakeCluster(node_ready_delay=0.1) as cluster,
        FakeHetzner(TOKEN, kube_url=cluster.url, kube_token=cluster.token, join_token=JOIN, boot_delay_s=0.05) as hz,
    ):
        provider = make_provider(hz, secrets)
        result = await provider.create_node(req(pool("cax11")))

        def get_node() -> dict | None:
            request = urllib.request.Request(
                f"{cluster.url}/api/v1/nodes/{result.node_name}",
                headers={"Authorization": f"Bearer {cluster.token}"},
            )
            try:
                with urllib.request.urlopen(request, timeout=10, context=cluster.ssl_context()) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError:
                return None

        deadline = time.monotonic() + 30
        node = None
        while time.monotonic() < deadline:
            node = await asyncio.to_thread(get_node)
            conds = {c["type"]: c["status"] for c in (node or {}).get("status", {}).get("conditions", [])}
            if conds.get("Ready") == "True":
                break
            await asyncio.sleep(0.05)
        assert node is not None
        assert node["spec"]["providerID"] == result.provider_id
        labels = node["metadata"]["labels"]
        assert labels[LABEL_CLUSTER] == "prod" and labels["team"] == "data"
        assert labels["kubernetes.io/arch"] == "arm64"
        assert {"key": "dedicated", "value": "data", "effect": "NoSchedule"} in node["spec"]["taints"]
        await provider.delete_node(
            DeleteNodeInput(
                cluster="prod", provider="hetzner", node_name=result.node_name, provider_id=result.provider_id
            )
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and await asyncio.to_thread(get_node) is not None:
            await asyncio.sleep(0.05)
        assert await asyncio.to_thread(get_node) is None


def test_from_settings_rejects_unknown_keys() -> None:
    provider = HetznerProvider.from_settings({"locations": ["hel1"], "cache_ttl_s": 60})
    assert provider.settings.locations == ["hel1"] and provider.name == "hetzner"
    with pytest.raises(ValueError):
        HetznerProvider.from_settings({"locaitons": ["hel1"]})


async def test_ca_settings_by_name_server_labels_and_no_public_ipv4(hz: FakeHetzner, secrets: Path) -> None:
    # What `growth nodes migrate-from-ca` writes for a CA group: HCLOUD_NETWORK/HCLOUD_FIREWALL and
    # placementGroup by name (CA resolves them through the API, hetzner_manager.go / BuildHetzner),
    # nodeConfigs.<pool>.serverLabels (1.36+) and HCLOUD_PUBLIC_IPV4=false.
    from hcloud import Client

    api = Client(token=TOKEN, api_endpoint=hz.url)
    group = api.placement_groups.create(name="pg-workers", type="spread").placement_group
    net_id, fw_id = hz.add_network("k8s"), hz.add_firewall("k8s-nodes")
    provider = make_provider(hz, secrets)
    p = pool(
        "cx32",
        networks=["k8s"],
        firewalls=["k8s-nodes", fw_id],
        placement_group="pg-workers",
        server_labels={"my-label": "my-value", LABEL_CLUSTER: "not-this"},
        public_ipv4=False,
    )
    first = await provider.create_node(req(p))
    second = await provider.create_node(req(p, request_id="nodes/prod/request/r2"))
    assert first.outcome == second.outcome == "created"
    servers = {s["id"]: s for s in hz.servers()}
    for result in (first, second):
        server = servers[int(result.provider_id.removeprefix("hcloud://"))]
        assert server["labels"]["my-label"] == "my-value"
        assert server["labels"][LABEL_CLUSTER] == "prod"  # growth's own labels win
        assert server["public_net"]["ipv4"] is None and server["public_net"]["ipv6"] is not None
        assert [n["network"] for n in server["private_net"]] == [net_id]
        assert [f["id"] for f in server["public_net"]["firewalls"]] == [fw_id]
        assert server["placement_group"]["id"] == group.id
    # Each name was looked up once, then cached.
    routes = hz.stats()["requests_by_route"]
    assert routes["GET /networks"] == routes["GET /firewalls"] == routes["GET /placement_groups"] == 1


async def test_a_name_the_project_lacks_is_a_config_error(hz: FakeHetzner, secrets: Path) -> None:
    provider = make_provider(hz, secrets)
    with pytest.raises(ApplicationError) as e:
        await provider.create_node(req(pool("cx32", networks=["nope"])))
    assert e.value.non_retryable and "networks[0]" in str(e.value) and hz.servers() == []


async def test_subnet_ip_range_creates_off_attaches_then_starts(hz: FakeHetzner, secrets: Path) -> None:
    # CA 1.35+ subnetIPRange: hetzner_node_group.go createServer creates the server off, attaches the
    # network with the ip range, then powers it on.
    net_id = hz.add_network("k8s", "10.0.0.0/16", ["10.0.0.0/24", "10.0.1.0/24"])
    provider = make_provider(hz, secrets)
    result = await provider.create_node(req(pool("cx32", networks=[net_id], subnet_ip_range="10.0.1.0/24")))
    [server] = hz.servers()
    assert result.outcome == "created" and server["status"] == "running"
    assert [(n["network"], n["ip"].startswith("10.0.1.")) for n in server["private_net"]] == [(net_id, True)]
    # A range that is no subnet of the network is refused before a server is bought.
    with pytest.raises(ApplicationError) as e:
        await provider.create_node(
            req(pool("cx32", networks=[net_id], subnet_ip_range="10.0.9.0/24"), request_id="nodes/prod/request/r9")
        )
    assert e.value.non_retryable and "10.0.9.0/24" in str(e.value) and len(hz.servers()) == 1
    # A retry of the activity finds it and leaves it as it is (no second attach, no second create).
    again = await provider.create_node(req(pool("cx32", networks=[net_id], subnet_ip_range="10.0.1.0/24")))
    assert again.provider_id == result.provider_id and hz.stats()["created_total"] == 1
    routes = hz.stats()["requests_by_route"]
    assert routes["POST /servers/{id}/actions/attach_to_network"] == routes["POST /servers/{id}/actions/poweron"] == 1


async def test_create_timeout_bounds_the_create_and_finds_the_server(hz: FakeHetzner, secrets: Path) -> None:
    # HCLOUD_SERVER_CREATION_TIMEOUT bounds the create call; a create answered late is found by
    # its labels, never sent a second time by growth.
    provider = make_provider(hz, secrets, create_timeout_s=0.5, timeout_s=10.0)
    hz.lose_create_responses(1, mode="delay", delay_s=1.5)
    try:
        result = await provider.create_node(req(pool()))
    except ApplicationError as e:  # looked before the late answer landed: retryable, nothing created twice
        assert not e.non_retryable
        result = await provider.create_node(req(pool(), attempt=1))
    assert result.outcome == "created" and hz.stats()["created_total"] == 1


async def test_servers_ca_made_are_adopted_scaled_down_by_id_and_never_collected(secrets: Path) -> None:
    """Servers made the way Cluster Autoscaler makes them (hetzner_node_group.go createServer: name
    `<group>-%x` of rand.Int63, label hcloud/node-group=<group>, its own cloud-init joining the
    cluster), found by growth as the migrated pool's nodes; growth's scale-down deletes one by its
    provider id, and machine GC, which lists growth's servers, never sees them."""
    import json
    import random
    import urllib.request

    from hcloud import Client
    from hcloud.images import Image
    from hcloud.locations import Location
    from hcloud.server_types import ServerType

    from scaling.kube.nodes import node_info
    from scaling.nodes.adoption import CA_NODE_GROUP_LABEL, adopt_nodes
    from scaling.nodes.migrate_ca import CaSettings, migrate
    from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
    from scaling.nodes.nodegroups import load_node_groups
    from scaling.nodes.scale_up.demand import tally_nodes
    from tests.polling import eventually

    cluster_mod = pytest.importorskip("sim.cluster")
    with (
        cluster_mod.FakeCluster(node_ready_delay=0.1) as cluster,
        FakeHetzner(TOKEN, kube_url=cluster.url, kube_token=cluster.token, join_token=JOIN, boot_delay_s=0.05) as hz,
    ):
        ca = Client(token=TOKEN, api_endpoint=hz.url)
        cloud_init = f"#cloud-config\nruncmd:\n  - kubeadm join 10.0.0.2:6443 --token {JOIN}\n"
        made = []
        for group in ("pool1", "pool1", "unmigrated"):
            name = f"{group}-{random.getrandbits(63):x}"
            ca.servers.create(
                name=name,
                server_type=ServerType(name="cx22"),
                image=Image(name="ubuntu-24.04"),
                location=Location(name="fsn1"),
                labels={CA_NODE_GROUP_LABEL: group},
                user_data=cloud_init,
            )
            made.append(name)

        def nodes() -> list[dict]:
            request = urllib.request.Request(
                f"{cluster.url}/api/v1/nodes", headers={"Authorization": f"Bearer {cluster.token}"}
            )
            with urllib.request.urlopen(request, timeout=10, context=cluster.ssl_context()) as resp:
                return json.loads(resp.read())["items"]

        eventually(lambda: len(nodes()) == 3, message="CA's servers joined")
        groups, _ = load_node_groups(migrate(CaSettings(args=["--nodes=1:3:cx22:fsn1:pool1"])).node_groups, {"hetzner"})
        adopted = adopt_nodes([node_info(n, []) for n in nodes()], groups)
        mine = {n.name: n for n in adopted if n.labels.get(LABEL_POOL) == "pool1"}
        assert set(mine) == set(made[:2])
        assert [(c.group, c.pool, c.count) for c in tally_nodes(adopted).groups] == [("pool1", "pool1", 2)]
        # GC lists growth's servers only (its cluster label): CA's are never candidates.
        provider = make_provider(hz, secrets)
        assert await provider.list_machines("prod") == []
        # Scale-down deletes the server by the Node's provider id; the Node goes with it.
        victim = mine[made[0]]
        await provider.delete_node(
            DeleteNodeInput(cluster="prod", provider="hetzner", node_name=victim.name, provider_id=victim.provider_id)
        )
        eventually(lambda: victim.name not in {n["metadata"]["name"] for n in nodes()}, message="node removed")
        assert sorted(s["name"] for s in hz.servers()) == sorted(made[1:])
        # Adoption is growth's reading: the Node itself is not relabelled.
        assert LABEL_GROUP not in next(n for n in nodes() if n["metadata"]["name"] == made[1])["metadata"]["labels"]
