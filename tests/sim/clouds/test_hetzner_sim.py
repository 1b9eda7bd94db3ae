"""FakeHetzner's contract: the shapes and codes the real Hetzner Cloud API documents, as the
official hcloud client sees them, plus its fault injection and the boot → Node registration."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from hcloud import APIException, Client
from hcloud.images import Image
from hcloud.locations import Location
from hcloud.server_types import ServerType

from sim.clouds.hetzner import FakeHetzner, parse_kubelet_user_data, parse_label_selector, selector_matches
from tests.polling import eventually

TOKEN = "sim-token"


@pytest.fixture
def hz() -> Iterator[FakeHetzner]:
    with FakeHetzner(TOKEN, boot_delay_s=0.05) as sim:
        yield sim


def client(hz: FakeHetzner, token: str = TOKEN, **kw: Any) -> Client:
    c = Client(token=token, api_endpoint=hz.url, poll_interval=0.01, **kw)
    c._client._retry_interval_func = lambda retries: 0.01  # keep hcloud's retries fast
    return c


def create(c: Client, name: str, server_type: str = "cx32", location: str = "fsn1", **kw: Any) -> Any:
    return c.servers.create(
        name=name,
        server_type=ServerType(name=server_type),
        image=Image(name="ubuntu-24.04"),
        location=Location(name=location),
        **kw,
    )


def raw(hz: FakeHetzner, method: str, path: str, token: str = TOKEN) -> tuple[int, dict[str, str], Any]:
    req = urllib.request.Request(hz.base_url + path, method=method, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read() or b"null")


def test_create_get_list_delete_shapes(hz: FakeHetzner) -> None:
    c = client(hz)
    resp = create(c, "node-a", labels={"growth.autoscaling.dev/cluster": "prod"}, user_data="#cloud-config\n")
    assert resp.server.name == "node-a" and resp.server.id > 0
    assert resp.server.server_type.name == "cx32" and resp.server.location.name == "fsn1"
    assert resp.action.command == "create_server"
    assert [a.command for a in resp.next_actions] == ["start_server"]
    assert resp.root_password is not None
    resp.action.wait_until_finished()
    assert c.servers.get_by_id(resp.server.id).status == "running"
    assert c.servers.get_by_name("node-a").id == resp.server.id
    assert [s.name for s in c.servers.get_all(label_selector="growth.autoscaling.dev/cluster=prod")] == ["node-a"]
    action = c.servers.delete(resp.server)
    assert action.command == "delete_server"
    with pytest.raises(APIException) as info:
        c.servers.get_by_id(resp.server.id)
    assert info.value.code == "not_found"
    status, _, body = raw(hz, "DELETE", f"/v1/servers/{resp.server.id}")
    assert status == 404 and body["error"]["code"] == "not_found"


def test_pagination_walks_every_page(hz: FakeHetzner) -> None:
    c = client(hz)
    for i in range(7):
        create(c, f"n{i}")
    status, _, body = raw(hz, "GET", "/v1/servers?per_page=3&page=2")
    assert status == 200
    assert body["meta"]["pagination"] == {
        "page": 2,
        "per_page": 3,
        "previous_page": 1,
        "next_page": 3,
        "last_page": 3,
        "total_entries": 7,
    }
    c.servers.max_per_page = 3
    assert sorted(s.name for s in c.servers.get_all()) == [f"n{i}" for i in range(7)]


def test_label_selector_language() -> None:
    labels = {"env": "prod", "team": "data"}
    for selector, expected in [
        ("env=prod", True),
        ("env==prod,team=data", True),
        ("env!=prod", False),
        ("env", True),
        ("!env", False),
        ("!missing", True),
        ("env in (staging,prod)", True),
        ("env notin (staging,prod)", False),
        ("env in (staging, prod),team!=web", True),
    ]:
        assert selector_matches(parse_label_selector(selector), labels) is expected, selector


def test_server_types_and_locations(hz: FakeHetzner) -> None:
    c = client(hz)
    types = {t.name: t for t in c.server_types.get_all()}
    assert {"cx31", "cx32", "cx33", "cax11"} <= set(types)
    cax = types["cax11"]
    assert cax.architecture == "arm" and cax.cores == 2 and cax.memory == 4.0
    assert {loc.location.name for loc in cax.locations} == {"fsn1", "nbg1", "hel1"}  # no Arm in ash
    assert types["cx32"].prices[0]["price_hourly"]["net"] == "0.0104000000"
    assert {loc.name for loc in c.locations.get_all()} == {"fsn1", "nbg1", "hel1", "ash"}


def test_deprecation_and_removal(hz: FakeHetzner) -> None:
    c = client(hz)
    hz.deprecate_server_type("cx31", unavailable_after="2000-01-01T00:00:00Z", locations=["fsn1"])
    hz.remove_server_type("cx22")
    types = {t.name: t for t in c.server_types.get_all()}
    assert "cx22" not in types
    per_loc = {loc.location.name: loc.deprecation for loc in types["cx31"].locations}
    assert per_loc["fsn1"] is not None and per_loc["nbg1"] is None
    with pytest.raises(APIException) as info:
        create(c, "old", "cx31", "fsn1")
    assert info.value.code == "invalid_input"
    assert create(c, "still-ok", "cx31", "nbg1").server.name == "still-ok"
    with pytest.raises(APIException):
        create(c, "gone", "cx22")


def test_unauthorized(hz: FakeHetzner) -> None:
    with pytest.raises(APIException) as info:
        client(hz, token="nope").servers.get_all()
    assert info.value.code == "unauthorized"
    assert raw(hz, "GET", "/v1/servers", token="nope")[0] == 401


def test_capacity_quota_and_uniqueness(hz: FakeHetzner) -> None:
    c = client(hz)
    hz.set_capacity("cx32", "fsn1", 1)
    first = create(c, "a1")
    with pytest.raises(APIException) as info:
        create(c, "a2")
    assert info.value.code == "resource_unavailable"
    assert create(c, "a2", location="nbg1").server.location.name == "nbg1"
    c.servers.delete(first.server)  # frees the slot
    assert create(c, "a3").server.location.name == "fsn1"
    with pytest.raises(APIException) as info:
        create(c, "a3", location="hel1")
    assert info.value.code == "uniqueness_error"
    hz.set_server_limit(2)
    with pytest.raises(APIException) as info:
        create(c, "a4", location="hel1")
    assert info.value.code == "resource_limit_exceeded"


def test_invalid_labels_refused(hz: FakeHetzner) -> None:
    with pytest.raises(APIException) as info:
        create(client(hz), "x", labels={"growth/req": "nodes/prod/r1"})
    assert info.value.code == "invalid_input"


def test_rate_limit_headers_and_storm(hz: FakeHetzner) -> None:
    status, headers, _ = raw(hz, "GET", "/v1/locations")
    assert status == 200 and headers["RateLimit-Limit"] == "3600"
    assert int(headers["RateLimit-Remaining"]) == 3599
    before = time.time()
    hz.rate_limit_storm(2, reset_in_s=50)
    status, headers, body = raw(hz, "GET", "/v1/locations")
    after = time.time()
    assert status == 429 and body["error"]["code"] == "rate_limit_exceeded"
    assert headers["RateLimit-Remaining"] == "0"
    # The reset is 50 s after the storm began, bracketed by clock reads (a slow machine only widens it).
    assert before + 49 <= int(headers["RateLimit-Reset"]) <= after + 51
    # hcloud retries rate_limit_exceeded itself and gets through after the storm.
    assert client(hz).locations.get_all()
    assert hz.stats()["requests_by_route"]["GET /locations"] == 4


def test_hourly_limit_is_enforced() -> None:
    with FakeHetzner(TOKEN, rate_limit_per_hour=3) as hz:
        codes = [raw(hz, "GET", "/v1/locations")[0] for _ in range(4)]
    assert codes == [200, 200, 200, 429]


def test_injected_5xx(hz: FakeHetzner) -> None:
    hz.inject_fault("server_error", 1, path="/servers")
    c = client(hz)
    with pytest.raises(APIException) as info:
        c.servers.get_all()
    assert info.value.code == "server_error"
    assert raw(hz, "GET", "/v1/servers")[0] == 200  # only once


def test_slow_actions(hz: FakeHetzner) -> None:
    hz.action_delay_s = 0.3
    c = client(hz)
    resp = create(c, "slow")
    assert resp.action.status == "running" and resp.server.status == "initializing"
    started = time.monotonic()
    resp.action.wait_until_finished()
    assert time.monotonic() - started >= 0.25
    assert c.servers.get_by_id(resp.server.id).status == "running"


def test_lost_create_response_still_creates(hz: FakeHetzner) -> None:
    hz.lose_create_responses(1, mode="drop")
    with pytest.raises(requests.ConnectionError):
        create(client(hz), "lost")
    assert [s["name"] for s in hz.servers()] == ["lost"]


def test_emptied_bucket_answers_as_hetzner_does(hz: FakeHetzner) -> None:
    # Another tool spent the project's hour: 429 with Remaining 0 and Reset when the bucket is
    # full again at one request a second (the documented 3600 an hour), not sooner.
    urllib.request.urlopen(
        urllib.request.Request(hz.base_url + "/sim/v1/rate_remaining", data=b'{"remaining": 0}', method="POST"),
        timeout=30,
    ).close()
    before = time.time()
    status, headers, body = raw(hz, "GET", "/v1/locations")
    assert status == 429 and body["error"]["code"] == "rate_limit_exceeded"
    assert headers["RateLimit-Remaining"] == "0"
    assert before + 3590 <= int(headers["RateLimit-Reset"]) <= time.time() + 3601


def test_create_answered_5xx_after_it_was_made(hz: FakeHetzner) -> None:
    # A backend error after the commit: Hetzner's error object and rate-limit headers, and the
    # server exists all the same.
    hz.lose_create_responses(1, mode="error", code="server_error")
    body = {"name": "made", "server_type": "cx32", "image": "ubuntu-24.04", "location": "fsn1"}
    resp = requests.post(f"{hz.url}/servers", json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert resp.status_code == 500
    assert resp.json()["error"]["code"] == "server_error" and resp.json()["error"]["message"]
    assert int(resp.headers["RateLimit-Remaining"]) < int(resp.headers["RateLimit-Limit"])
    assert [s["name"] for s in hz.servers()] == ["made"]
    # Only 5xx codes: a 4xx says the create did not happen, which would be a lie here.
    with pytest.raises(ValueError, match="5xx"):
        hz.lose_create_responses(1, mode="error", code="uniqueness_error")


def test_control_api(hz: FakeHetzner) -> None:
    def control(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body or {}).encode()
        req = urllib.request.Request(hz.base_url + "/sim/v1" + path, data=data, method=method)
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    control("POST", "/capacity", {"server_type": "cx32", "location": "fsn1", "count": 0})
    with pytest.raises(APIException) as info:
        create(client(hz), "c1")
    assert info.value.code == "resource_unavailable"
    control("DELETE", "/server_types/cx33")
    assert "cx33" not in {t.name for t in client(hz).server_types.get_all()}
    stats = control("GET", "/stats")
    assert stats["requests"] == 2  # control calls are not API requests


def test_user_data_parsing() -> None:
    user_data = (
        'KUBELET_EXTRA_ARGS="--node-labels=a=b,c.io/d=e --register-with-taints=k=v:NoSchedule,x:NoExecute"\n'
        "  - kubeadm join 10.0.0.1:6443 --token abc.def --node-name n1\n"
    )
    token, labels, taints = parse_kubelet_user_data(user_data)
    assert token == "abc.def"
    assert labels == {"a": "b", "c.io/d": "e"}
    assert taints == [{"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "x", "effect": "NoExecute"}]


def _kube_get(cluster: Any, path: str) -> tuple[int, Any]:
    req = urllib.request.Request(cluster.url + path, headers={"Authorization": f"Bearer {cluster.token}"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=cluster.ssl_context()) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, None


def test_boot_registers_node_in_sim_cluster_and_delete_removes_it() -> None:
    cluster_mod = pytest.importorskip("sim.cluster")
    join = "abcdef.0123456789abcdef"
    user_data = (
        'KUBELET_EXTRA_ARGS="--node-labels=growth.autoscaling.dev/pool=hetzner-cx32 '
        '--register-with-taints=dedicated=data:NoSchedule"\n'
        f"  - kubeadm join 10.0.0.1:6443 --token {join} --node-name n1\n"
    )
    with (
        cluster_mod.FakeCluster(node_ready_delay=0.1) as cluster,
        FakeHetzner(TOKEN, kube_url=cluster.url, kube_token=cluster.token, join_token=join, boot_delay_s=0.05) as hz,
    ):
        c = client(hz)
        good = create(c, "good-node", user_data=user_data)
        bad = create(c, "bad-node", user_data=user_data.replace(join, "stolen.0000000000000000"))

        def ready() -> Any:
            status, node = _kube_get(cluster, "/api/v1/nodes/good-node")
            if status != 200:
                return None
            conds = {x["type"]: x["status"] for x in node.get("status", {}).get("conditions", [])}
            return node if conds.get("Ready") == "True" else None

        node = eventually(ready)
        assert node["spec"]["providerID"] == f"hcloud://{good.server.id}"
        assert node["metadata"]["labels"]["growth.autoscaling.dev/pool"] == "hetzner-cx32"
        assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "cx32"
        # The registered taint, beside the node lifecycle controller's (not-ready may linger a pass).
        registered = [t for t in node["spec"]["taints"] if not t["key"].startswith("node.kubernetes.io/")]
        assert registered == [{"key": "dedicated", "value": "data", "effect": "NoSchedule"}]
        assert node["status"]["capacity"]["cpu"] == "4"
        eventually(lambda: "bad-node" in hz.stats()["join_refused"])
        assert _kube_get(cluster, "/api/v1/nodes/bad-node")[0] == 404
        c.servers.delete(good.server)
        c.servers.delete(bad.server)
        eventually(lambda: _kube_get(cluster, "/api/v1/nodes/good-node")[0] == 404)


def test_boot_without_cluster_just_runs(hz: FakeHetzner) -> None:
    assert hz.kubelet is None  # a cloud API alone: nothing joins its servers anywhere
    resp = create(client(hz), "alone")
    eventually(lambda: client(hz).servers.get_by_id(resp.server.id).status == "running")
    client(hz).servers.delete(resp.server)
    eventually(lambda: hz.servers() == [])


def test_tokens_of_one_project_share_its_budget_and_429_has_hetzners_shape() -> None:
    """Hetzner counts per project: two tokens of one project draw on one bucket; another
    project's token has its own. The 429 body is Hetzner's error object."""
    with FakeHetzner(TOKEN, rate_limit_per_hour=3) as hz:
        hz.add_token("other-tool", project="default")
        hz.add_token("elsewhere", project="second")
        assert raw(hz, "GET", "/v1/locations")[0] == 200
        assert raw(hz, "GET", "/v1/locations", token="other-tool")[0] == 200
        status, headers, body = raw(hz, "GET", "/v1/locations", token="other-tool")
        assert (status, headers["RateLimit-Remaining"], headers["RateLimit-Limit"]) == (200, "0", "3")
        status, headers, body = raw(hz, "GET", "/v1/locations")
        assert status == 429
        assert body["error"]["code"] == "rate_limit_exceeded" and body["error"]["message"]
        assert headers["RateLimit-Remaining"] == "0"
        assert raw(hz, "GET", "/v1/locations", token="elsewhere")[0] == 200
        projects = hz.stats()["projects"]
        assert projects["default"]["requests"] == 4 and projects["default"]["responses_429"] == 1
        assert projects["second"]["requests"] == 1 and projects["second"]["responses_429"] == 0


def test_bucket_refills_one_per_3600th_of_the_limit_scaled_by_the_time_scale() -> None:
    """Remaining grows by limit/3600 a second (times rate_time_scale); Reset is when it is full."""
    # One request back every 0.5 s: the GET right after emptying the bucket finds it empty even
    # on a busy machine (at 100 a second, a 10 ms delay refilled it and the GET got 200).
    with FakeHetzner(TOKEN, rate_limit_per_hour=3600, rate_time_scale=2.0) as hz:
        hz.set_rate_remaining(0)
        before = time.time()
        status, headers, _ = raw(hz, "GET", "/v1/locations")
        assert status == 429
        # Empty bucket: full again after 3600 requests at 2 a second = 1,800 s.
        assert before + 1799 <= int(headers["RateLimit-Reset"]) <= time.time() + 1801
        eventually(lambda: raw(hz, "GET", "/v1/locations")[0] == 200, timeout=5)


def test_images_by_name_per_architecture_and_snapshots_by_label(hz: FakeHetzner) -> None:
    c = client(hz)
    old = hz.add_snapshot({"os": "talos"}, "arm", created=time.time() - 100)
    new = hz.add_snapshot({"os": "talos"}, "arm", created=time.time() - 10)
    x86 = hz.add_snapshot({"os": "talos"}, "x86")
    found = c.images.get_list(
        label_selector="os=talos", type=["snapshot"], architecture=["arm"], sort=["created:desc"], per_page=1
    ).images
    assert [i.id for i in found] == [new]
    assert {i.id for i in c.images.get_all(label_selector="os=talos")} == {old, new, x86}
    arm = c.images.get_by_name_and_architecture("ubuntu-24.04", "arm")
    amd = c.images.get_by_name_and_architecture("ubuntu-24.04", "x86")
    assert arm.id != amd.id and arm.architecture == "arm"
    # A name is resolved for the server type's architecture; an id of the other one is refused.
    server = create(c, "arm-node", server_type="cax11").server
    assert server.image.id == arm.id and server.image.architecture == "arm"
    with pytest.raises(APIException) as info:
        c.servers.create(
            name="wrong-arch", server_type=ServerType(name="cx32"), image=Image(id=new), location=Location(name="fsn1")
        )
    assert info.value.code == "invalid_input"
    from_snapshot = c.servers.create(
        name="from-snapshot", server_type=ServerType(name="cax11"), image=Image(id=new), location=Location(name="fsn1")
    )
    assert from_snapshot.server.image.id == new


def test_spread_placement_group_holds_ten_servers(hz: FakeHetzner) -> None:
    from hcloud.placement_groups import PlacementGroup

    c = client(hz)
    group = c.placement_groups.create(name="spread-a", type="spread", labels={"pool": "a"}).placement_group
    with pytest.raises(APIException) as dup:
        c.placement_groups.create(name="spread-a", type="spread")
    assert dup.value.code == "uniqueness_error"
    for i in range(10):
        create(c, f"pg-{i}", placement_group=PlacementGroup(id=group.id))
    with pytest.raises(APIException) as info:
        create(c, "pg-10", placement_group=PlacementGroup(id=group.id))
    assert info.value.code == "placement_error"
    [listed] = c.placement_groups.get_all(label_selector="pool=a")
    assert len(listed.servers) == 10 and listed.type == "spread"


def test_networks_firewalls_and_placement_groups_are_found_by_name(hz: FakeHetzner) -> None:
    # Cluster Autoscaler takes HCLOUD_NETWORK/HCLOUD_FIREWALL and placementGroup as an id or a name;
    # hcloud-go's Get(idOrName) and hcloud-python's get_by_name list with ?name=.
    c = client(hz)
    net_id = hz.add_network("k8s", "10.0.0.0/16", ["10.0.0.0/24", "10.0.1.0/24"])
    fw_id = hz.add_firewall("k8s-nodes")
    pg = c.placement_groups.create(name="spread-a", type="spread").placement_group
    assert c.networks.get_by_name("k8s").id == net_id
    assert [s.ip_range for s in c.networks.get_by_name("k8s").subnets] == ["10.0.0.0/24", "10.0.1.0/24"]
    assert c.firewalls.get_by_name("k8s-nodes").id == fw_id
    assert c.placement_groups.get_by_name("spread-a").id == pg.id
    assert c.networks.get_by_name("nope") is None and c.firewalls.get_by_name("nope") is None
    created = c.firewalls.create(name="extra").firewall
    assert c.firewalls.get_by_id(created.id).name == "extra"


def test_servers_need_existing_networks_and_firewalls_and_honour_public_net(hz: FakeHetzner) -> None:
    from hcloud.firewalls import Firewall
    from hcloud.networks import Network
    from hcloud.servers import ServerCreatePublicNetwork

    c = client(hz)
    with pytest.raises(APIException) as info:
        create(c, "no-net", networks=[Network(id=999)])
    assert info.value.code == "invalid_input"
    net_id, fw_id = hz.add_network("k8s"), hz.add_firewall("fw")
    server = create(
        c,
        "private",
        networks=[Network(id=net_id)],
        firewalls=[Firewall(id=fw_id)],
        public_net=ServerCreatePublicNetwork(enable_ipv4=False, enable_ipv6=True),
    ).server
    got = c.servers.get_by_id(server.id)
    assert got.public_net.ipv4 is None and got.public_net.ipv6 is not None
    assert [n.network.id for n in got.private_net] == [net_id]
    assert [f.firewall.id for f in got.public_net.firewalls] == [fw_id]


def test_a_server_created_off_is_attached_in_a_subnet_then_powered_on(hz: FakeHetzner) -> None:
    # CA's createServer with a subnetIPRange: create off, attach_to_network(ip_range), power on.
    from hcloud.networks import Network

    c = client(hz)
    net_id = hz.add_network("k8s", "10.0.0.0/16", ["10.0.0.0/24", "10.0.1.0/24"])
    server = create(c, "in-subnet", start_after_create=False).server
    assert c.servers.get_by_id(server.id).status == "off"
    with pytest.raises(APIException) as info:
        c.servers.attach_to_network(server, Network(id=net_id), ip_range="10.0.9.0/24")
    assert info.value.code == "invalid_input"
    c.servers.attach_to_network(server, Network(id=net_id), ip_range="10.0.1.0/24")
    with pytest.raises(APIException) as again:
        c.servers.attach_to_network(server, Network(id=net_id))
    assert again.value.code == "server_already_attached"
    c.servers.power_on(server)
    got = c.servers.get_by_id(server.id)
    assert got.status == "running" and got.private_net[0].ip.startswith("10.0.1.")
