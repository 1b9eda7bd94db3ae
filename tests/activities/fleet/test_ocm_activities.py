"""The OCM activities against the fake OCM over HTTP (httpx, as in the worker): idempotent
creates, each terraforming step, deletion, and how each fault reaches Temporal (retryable or
not, the field named, the token never shown)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.answers import verified_context
from activities.fleet.ocm import (
    PARAM_AGENT_TOKEN,
    PARAM_CLUSTER_ID,
    PARAM_CONTROL_PLANE_URL,
    OcmActivities,
    syncset_id,
)
from activities.fleet.ocm_client import OcmClient
from activities.fleet.settings import FleetSettings, OcmSettings
from activities.fleet.tokens import AgentTokens
from scaling.fleet import contracts
from scaling.fleet.contracts import (
    AddonInput,
    AddonRef,
    CleanupInput,
    ClusterResourcesInput,
    CreateMachinePoolInput,
    CreateOcmClusterInput,
    IdentityProviderInput,
    MachinePoolTaint,
    OcmCluster,
    OcmClusterRef,
    ocm_cluster_name,
)
from sim.clouds.ocm import API, FakeOcm
from tests.activities.fleet.conftest import IDP_SECRET, OCM_TOKEN

ENV = ActivityEnvironment()
LABEL = contracts.INSTANCE_PROFILE_LABEL


def create_input(cluster_id: str = "aws-us-east-1-standard-1", **kw: Any) -> CreateOcmClusterInput:
    base: dict[str, Any] = dict(
        cluster_id=cluster_id, provider="aws", region="us-east-1", multi_az=True, compute_machine_type="m5.2xlarge"
    )
    return CreateOcmClusterInput(**{**base, **kw})


def ocm_http(ocm: FakeOcm) -> httpx.Client:
    return httpx.Client(
        base_url=ocm.url + API, headers={"Authorization": f"Bearer {OCM_TOKEN}"}, verify=verified_context()
    )


async def ready(acts: OcmActivities, ocm: FakeOcm, cluster_id: str = "aws-us-east-1-standard-1") -> OcmCluster:
    created = await ENV.run(acts.create_ocm_cluster, create_input(cluster_id))
    ocm.advance(200)
    got = await ENV.run(acts.get_ocm_cluster, OcmClusterRef(ocm_id=created.ocm_id, cluster_id=cluster_id))
    assert got.state == "ready"
    return got


async def fails(call: Any, arg: Any) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await ENV.run(call, arg)
    return info.value


# -- clusters ------------------------------------------------------------------------------
async def test_create_is_idempotent(acts: OcmActivities, ocm: FakeOcm) -> None:
    first = await ENV.run(acts.create_ocm_cluster, create_input())
    assert first.created and first.state == "pending" and first.name == ocm_cluster_name(first.cluster_id)
    again = await ENV.run(acts.create_ocm_cluster, create_input())
    assert not again.created and again.ocm_id == first.ocm_id
    assert ocm.stats()["clusters_created"] == 1
    sent = ocm.clusters()[0]
    assert sent["external_id"] == "aws-us-east-1-standard-1" and sent["multi_az"] is True
    assert sent["nodes"]["autoscale_compute"] == {"min_replicas": 6, "max_replicas": 18}
    assert sent["nodes"]["compute_machine_type"] == {"id": "m5.2xlarge"}


async def test_lost_create_response_never_makes_a_second_cluster(acts: OcmActivities, ocm: FakeOcm) -> None:
    ocm.lose_create_responses(1)
    err = await fails(acts.create_ocm_cluster, create_input())
    assert err.type == contracts.ERR_OCM_UNAVAILABLE and not err.non_retryable
    retried = await ENV.run(acts.create_ocm_cluster, create_input())  # what Temporal's retry runs
    assert not retried.created and retried.ocm_id
    # get and delete work without the OCM id the lost answer carried
    ref = OcmClusterRef(ocm_id="", cluster_id="aws-us-east-1-standard-1")
    assert (await ENV.run(acts.get_ocm_cluster, ref)).ocm_id == retried.ocm_id
    assert (await ENV.run(acts.delete_ocm_cluster, ref)).state == "uninstalling"
    stats = ocm.stats()
    assert stats["clusters_created"] == 1 and stats["lost_responses"] == 1 and stats["delete_requests"] == 1


async def test_create_answered_503_after_it_was_made_never_makes_a_second_cluster(
    acts: OcmActivities, ocm: FakeOcm
) -> None:
    ocm.lose_create_responses(1, status=503)
    err = await fails(acts.create_ocm_cluster, create_input())
    assert not err.non_retryable
    retried = await ENV.run(acts.create_ocm_cluster, create_input())
    assert not retried.created and retried.ocm_id
    assert ocm.stats()["clusters_created"] == 1 and ocm.stats()["clusters_leaked"] == 0


async def test_create_finds_a_cluster_with_its_name(acts: OcmActivities, ocm: FakeOcm) -> None:
    """A cluster with growth's derived name but no external id (made by hand or an old version)
    is the same cluster: no 'already exists' failure, no second cluster."""
    name = ocm_cluster_name("c-by-name")
    with ocm_http(ocm) as http:
        made = http.post(
            "/clusters", json={"name": name, "cloud_provider": {"id": "aws"}, "region": {"id": "r"}}
        ).json()
    got = await ENV.run(acts.create_ocm_cluster, create_input("c-by-name"))
    assert got.ocm_id == made["id"] and not got.created
    assert ocm.stats()["clusters_created"] == 1


async def test_create_finds_its_cluster_while_it_is_uninstalling(acts: OcmActivities, ocm: FakeOcm) -> None:
    """OCM keeps an uninstalling cluster's name taken: a create for the same id (a retry whose
    cluster was deleted meanwhile, a reset workflow) answers with that cluster, never with
    "already exists" and never with a second cluster; once it is gone, the name is free."""
    c = await ready(acts, ocm)
    await ENV.run(acts.delete_ocm_cluster, OcmClusterRef(ocm_id=c.ocm_id, cluster_id=c.cluster_id))
    again = await ENV.run(acts.create_ocm_cluster, create_input())
    assert again.ocm_id == c.ocm_id and again.state == "uninstalling" and not again.created
    assert ocm.stats()["clusters_created"] == 1
    # A live cluster with the external id (a stray made by hand) wins over the uninstalling one.
    with ocm_http(ocm) as http:
        body = {"name": "stray", "external_id": c.cluster_id, "cloud_provider": {"id": "aws"}, "region": {"id": "r"}}
        stray = http.post("/clusters", json=body).json()
    assert (await ENV.run(acts.create_ocm_cluster, create_input())).ocm_id == stray["id"]
    ocm.advance(200)
    with ocm_http(ocm) as http:
        http.delete(f"/clusters/{stray['id']}").raise_for_status()
    ocm.advance(200)
    fresh = await ENV.run(acts.create_ocm_cluster, create_input())
    assert fresh.created and fresh.ocm_id not in (c.ocm_id, stray["id"]) and fresh.name == c.name
    assert ocm.stats()["clusters_leaked"] == 0


async def test_states_error_and_gone(acts: OcmActivities, ocm: FakeOcm) -> None:
    ocm.clusters_end_in_error(1, "no quota in us-east-1")
    created = await ENV.run(acts.create_ocm_cluster, create_input("bad"))
    ref = OcmClusterRef(ocm_id=created.ocm_id, cluster_id="bad")
    ocm.advance(100)
    assert (await ENV.run(acts.get_ocm_cluster, ref)).state == "installing"
    ocm.advance(100)
    failed = await ENV.run(acts.get_ocm_cluster, ref)
    assert failed.state == "error" and failed.message == "no quota in us-east-1"
    assert (await ENV.run(acts.delete_ocm_cluster, ref)).state == "uninstalling"
    assert (await ENV.run(acts.get_ocm_cluster, ref)).state == "uninstalling"
    ocm.advance(100)
    assert (await ENV.run(acts.get_ocm_cluster, ref)).state == "gone"
    assert (await ENV.run(acts.delete_ocm_cluster, ref)).state == "gone"
    assert (await ENV.run(acts.get_ocm_cluster, OcmClusterRef(ocm_id="", cluster_id="never"))).state == "gone"


async def test_bad_create_is_final_and_names_the_field(acts: OcmActivities, ocm: FakeOcm) -> None:
    err = await fails(acts.create_ocm_cluster, create_input(provider="moon"))
    assert err.type == contracts.ERR_OCM_BAD_REQUEST and err.non_retryable
    assert "field cloud_provider.id" in str(err) and err.details[0]["field"] == "cloud_provider.id"
    err = await fails(acts.create_ocm_cluster, create_input(default_min_nodes=4))
    assert err.non_retryable and "nodes.autoscale_compute.min_replicas" in str(err)
    assert ocm.stats()["clusters_created"] == 0


# -- faults --------------------------------------------------------------------------------
async def test_rate_limit_and_5xx_are_retryable(acts: OcmActivities, ocm: FakeOcm) -> None:
    ocm.rate_limit(1, retry_after_s=7)
    err = await fails(acts.create_ocm_cluster, create_input())
    assert err.type == contracts.ERR_OCM_UNAVAILABLE and not err.non_retryable
    assert err.next_retry_delay == timedelta(seconds=7) and "429" in str(err)
    ocm.inject_fault(502, 1, method="POST")
    err = await fails(acts.create_ocm_cluster, create_input())
    assert err.type == contracts.ERR_OCM_UNAVAILABLE and not err.non_retryable and "502" in str(err)
    assert (await ENV.run(acts.create_ocm_cluster, create_input())).created
    assert ocm.stats()["clusters_created"] == 1


async def test_slow_answer_times_out_retryably(ocm: FakeOcm, fleet_settings: FleetSettings) -> None:
    quick = OcmActivities(fleet_settings, OcmClient(fleet_settings.ocm.model_copy(update={"timeout_s": 0.5})))
    try:
        ocm.slow_responses(3.0, 1, method="GET")
        err = await fails(quick.get_ocm_cluster, OcmClusterRef(ocm_id="x", cluster_id="c"))
        assert err.type == contracts.ERR_OCM_UNAVAILABLE and not err.non_retryable and "timed out" in str(err)
    finally:
        await quick.ocm.aclose()


async def test_refused_or_missing_token_is_final_and_never_shown(
    ocm: FakeOcm, fleet_settings: FleetSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "wrong").write_text("wrong-token-value")
    wrong = OcmActivities(fleet_settings, OcmClient(OcmSettings(base_url=ocm.url, token_file=str(tmp_path / "wrong"))))
    missing = OcmActivities(fleet_settings, OcmClient(OcmSettings(base_url=ocm.url, token_env="OCM_TEST_TOKEN")))
    try:
        err = await fails(wrong.create_ocm_cluster, create_input())
        assert err.type == contracts.ERR_OCM_UNAUTHORIZED and err.non_retryable
        assert "wrong-token-value" not in str(err)
        monkeypatch.delenv("OCM_TEST_TOKEN", raising=False)
        err = await fails(missing.create_ocm_cluster, create_input())
        assert err.non_retryable and "$OCM_TEST_TOKEN" in str(err)
        monkeypatch.setenv("OCM_TEST_TOKEN", OCM_TOKEN)  # from the environment works too
        assert (await ENV.run(missing.create_ocm_cluster, create_input())).created
    finally:
        await wrong.ocm.aclose()
        await missing.ocm.aclose()


# -- terraforming ----------------------------------------------------------------------------
def pool_input(ocm_id: str, **kw: Any) -> CreateMachinePoolInput:
    base: dict[str, Any] = dict(
        ocm_id=ocm_id,
        cluster_id="aws-us-east-1-standard-1",
        pool_id="kafka-standard",
        instance_type="standard",
        machine_type="r5.xlarge",
        min_nodes=3,
        max_nodes=18,
        multi_az=True,
        labels={LABEL: "standard"},
        taints=[MachinePoolTaint(key=LABEL, value="standard")],
    )
    return CreateMachinePoolInput(**{**base, **kw})


async def test_machine_pool_created_once(acts: OcmActivities, ocm: FakeOcm) -> None:
    c = await ready(acts, ocm)
    made = await ENV.run(acts.create_machine_pool, pool_input(c.ocm_id))
    assert made.created and (made.min_nodes, made.max_nodes) == (3, 18)
    again = await ENV.run(acts.create_machine_pool, pool_input(c.ocm_id, max_nodes=30))
    assert not again.created and again.max_nodes == 18  # what OCM holds
    with ocm_http(ocm) as http:
        pool = http.get(f"/clusters/{c.ocm_id}/machine_pools/kafka-standard").json()
    assert pool["labels"] == {LABEL: "standard"} and pool["instance_type"] == "r5.xlarge"
    assert pool["taints"] == [{"key": LABEL, "value": "standard", "effect": "NoExecute"}]
    err = await fails(acts.create_machine_pool, pool_input(c.ocm_id, pool_id="kafka-odd", min_nodes=1))
    assert err.non_retryable and "field autoscaling.min_replicas" in str(err)


async def test_ingress_dns_waits_for_the_default_ingress(acts: OcmActivities, ocm: FakeOcm) -> None:
    created = await ENV.run(acts.create_ocm_cluster, create_input())
    ref = OcmClusterRef(ocm_id=created.ocm_id, cluster_id=created.cluster_id)
    err = await fails(acts.ensure_ingress_dns, ref)
    assert err.type == contracts.ERR_OCM_NOT_FOUND and not err.non_retryable
    ocm.advance(200)
    dns = await ENV.run(acts.ensure_ingress_dns, ref)
    assert dns.dns_name == f"apps.{created.name}.{ocm.base_domain}"


class RacingTransport(httpx.AsyncBaseTransport):
    """Another attempt creates the same identity provider just before this one's POST lands."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.raced = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/identity_providers") and not self.raced:
            self.raced = True
            twin = httpx.Request("POST", request.url, headers=request.headers, content=request.content)
            first = await self.inner.handle_async_request(twin)
            await first.aread()
            assert first.status_code == 201
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_identity_provider_already_exists_is_found_by_name(ocm: FakeOcm, fleet_settings: FleetSettings) -> None:
    transport = RacingTransport()
    acts = OcmActivities(fleet_settings, OcmClient(fleet_settings.ocm, transport=transport))
    try:
        c = await ready(acts, ocm)
        inp = IdentityProviderInput(ocm_id=c.ocm_id, cluster_id=c.cluster_id)
        raced = await ENV.run(acts.ensure_identity_provider, inp)  # its POST was answered 400 "already exists"
        assert transport.raced and not raced.created and raced.idp_id
        assert await ENV.run(acts.ensure_identity_provider, inp) == raced
        with ocm_http(ocm) as http:
            idps = http.get(f"/clusters/{c.ocm_id}/identity_providers").json()["items"]
        assert [i["name"] for i in idps] == ["Kafka_SRE"] and idps[0]["open_id"]["issuer"]
    finally:
        await acts.ocm.aclose()


async def test_identity_provider_created_and_secret_required(
    acts: OcmActivities, ocm: FakeOcm, fleet_settings: FleetSettings
) -> None:
    c = await ready(acts, ocm)
    made = await ENV.run(acts.ensure_identity_provider, IdentityProviderInput(ocm_id=c.ocm_id, cluster_id=c.cluster_id))
    assert made.created
    idp = fleet_settings.identity_provider.model_copy(update={"client_secret_file": "/nonexistent"})
    other = OcmActivities(fleet_settings.model_copy(update={"identity_provider": idp}))
    try:
        err = await fails(
            other.ensure_identity_provider,
            IdentityProviderInput(ocm_id=c.ocm_id, cluster_id=c.cluster_id, name="other"),
        )
        assert err.non_retryable and "/nonexistent" in str(err) and IDP_SECRET not in str(err)
    finally:
        await other.ocm.aclose()


async def test_cluster_resources_applied_and_replaced(acts: OcmActivities, ocm: FakeOcm) -> None:
    c = await ready(acts, ocm)
    inp = ClusterResourcesInput(
        ocm_id=c.ocm_id, cluster_id=c.cluster_id, ingress_dns_name="apps.x.example.com", instance_types=["standard"]
    )
    first = await ENV.run(acts.apply_cluster_resources, inp)
    assert first.syncset_id == syncset_id(c.cluster_id) and first.resources == 3
    second = await ENV.run(acts.apply_cluster_resources, inp.model_copy(update={"instance_types": ["standard", "developer"]}))  # fmt: skip
    assert second == first
    with ocm_http(ocm) as http:
        held = http.get(f"/clusters/{c.ocm_id}/external_configuration/syncsets").json()["items"]
    assert len(held) == 1
    kinds = {r["kind"]: r for r in held[0]["resources"]}
    assert kinds["ConfigMap"]["data"]["instance-types"] == "standard,developer"
    assert kinds["IngressController"]["spec"]["domain"] == "kas.x.example.com"


async def test_addons_install_poll_and_fleetshard_credentials(
    acts: OcmActivities, ocm: FakeOcm, fleet_settings: FleetSettings
) -> None:
    c = await ready(acts, ocm)
    strimzi = AddonInput(ocm_id=c.ocm_id, cluster_id=c.cluster_id, addon_id=contracts.STRIMZI_ADDON)
    assert (await ENV.run(acts.install_addon, strimzi)).state == "installing"
    assert (await ENV.run(acts.install_addon, strimzi)).state == "installing"  # the existing one, no error
    fleetshard = AddonInput(
        ocm_id=c.ocm_id,
        cluster_id=c.cluster_id,
        addon_id=contracts.FLEETSHARD_ADDON,
        parameters={"poll-interval": "15s"},
    )
    await ENV.run(acts.install_addon, fleetshard)
    ref = AddonRef(ocm_id=c.ocm_id, cluster_id=c.cluster_id, addon_id=contracts.STRIMZI_ADDON)
    assert (await ENV.run(acts.get_addon, ref)).state == "installing"
    ocm.advance(100)
    assert (await ENV.run(acts.get_addon, ref)).state == "ready"
    params = next(a for a in ocm.addon_installations() if a["addon_id"] == contracts.FLEETSHARD_ADDON)["parameters"]
    assert params[PARAM_CLUSTER_ID] == c.cluster_id and params[PARAM_CONTROL_PLANE_URL] == "http://127.0.0.1:9999"
    assert params["poll-interval"] == "15s"
    tokens = AgentTokens(fleet_settings.agent_api)
    assert tokens.verify(c.cluster_id, params[PARAM_AGENT_TOKEN])
    assert not tokens.verify("another-cluster", params[PARAM_AGENT_TOKEN])
    assert (await ENV.run(acts.get_addon, ref.model_copy(update={"addon_id": "nope"}))).state == "absent"


async def test_failed_addon(acts: OcmActivities, ocm: FakeOcm) -> None:
    c = await ready(acts, ocm)
    ocm.fail_addon(contracts.STRIMZI_ADDON)
    addon = AddonInput(ocm_id=c.ocm_id, cluster_id=c.cluster_id, addon_id=contracts.STRIMZI_ADDON)
    await ENV.run(acts.install_addon, addon)
    ocm.advance(100)
    got = await ENV.run(acts.get_addon, AddonRef(**addon.model_dump(exclude={"parameters"})))
    assert got.state == "failed" and got.message


async def test_cleanup_deletes_strays_with_the_external_id(acts: OcmActivities, ocm: FakeOcm) -> None:
    c = await ready(acts, ocm)
    with ocm_http(ocm) as http:
        body = {"name": "stray", "external_id": c.cluster_id, "cloud_provider": {"id": "aws"}, "region": {"id": "r"}}
        stray = http.post("/clusters", json=body).json()
    await ENV.run(acts.delete_ocm_cluster, OcmClusterRef(ocm_id=c.ocm_id, cluster_id=c.cluster_id))
    await ENV.run(acts.cleanup_cluster_resources, CleanupInput(cluster_id=c.cluster_id, ocm_id=c.ocm_id))
    assert {x["id"]: x["state"] for x in ocm.clusters()} == {c.ocm_id: "uninstalling", stray["id"]: "uninstalling"}
    await ENV.run(acts.cleanup_cluster_resources, CleanupInput(cluster_id=c.cluster_id))  # again: nothing to do
    assert ocm.stats()["delete_requests"] == 2


def test_build_activities_registers_exactly_the_contract(fleet_settings: FleetSettings) -> None:
    from activities.fleet import build_activities

    names = {a.__temporal_activity_definition.name for a in build_activities(fleet_settings)}
    assert names == contracts.ACTIVITY_NAMES
