"""The fake PD: stores API with byte sizes as PD writes them, and POST /autoscaling with the
released behaviour (CPU only, one instance per answer, full group information, null when
there is nothing or metrics fail). Also the external recommender."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from sim.tidb.pd import byte_size
from sim.tidb.world import FakeTidb
from tests.sim.tidb.conftest import NS, running, tc_body

G, V, TC = "pingcap.com", "v1alpha1", "tidbclusters"
PD = f"/pd/{NS}/basic"
GROUP = "pd-auto-scaling-tikv"  # the label released PD gives a new TiKV group


def strategy(max_t: float = 0.8, min_t: float = 0.2, count: int | None = 2, component: str = "tikv") -> dict[str, Any]:
    resource: dict[str, Any] = {"resource_type": "hot", "cpu": 4000, "memory": 8 * 2**30, "storage": 100 * 2**30}
    if count is not None:
        resource["count"] = count
    return {
        "rules": [
            {
                "component": component,
                "cpu_rule": {"max_threshold": max_t, "min_threshold": min_t, "resource_types": ["hot"]},
                # tidb-operator's translation of a storage max_threshold of 0.9 (1 - 0.9)
                "storage_rule": {"min_threshold": 0.1, "resource_types": ["hot"]},
            }
        ],
        "resources": [resource],
    }


def plans(http: httpx.Client, body: Any) -> Any:
    resp = http.post(f"{PD}/autoscaling", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.fixture
def basic(world: FakeTidb, custom: client.CustomObjectsApi, http: httpx.Client) -> None:
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=3, tidb=1, tikv_cpu="2"))
    running(http, 4)


def add_group(custom: client.CustomObjectsApi, http: httpx.Client, replicas: int, tikv_total: int) -> None:
    """What an operator does with PD's plan: a TidbCluster joining basic, labelled for the group."""
    labels = {"group": GROUP, "resource-type": "hot", "specialUse": "hotRegion"}
    body = tc_body(
        "auto-hot",
        tikv=replicas,
        tidb=0,
        pd=None,
        tikv_cpu="4",
        base="basic",
        tikv_config={"server": {"labels": labels}},
    )
    try:
        custom.create_namespaced_custom_object(G, V, NS, TC, body)
    except client.ApiException as exc:
        assert exc.status == 409
        custom.patch_namespaced_custom_object(G, V, NS, TC, "auto-hot", {"spec": {"tikv": {"replicas": replicas}}})
    running(http, tikv_total, "tikv")


def test_byte_sizes_are_written_like_pd() -> None:
    assert byte_size(100 * 2**30) == "100GiB"
    assert byte_size(59.99 * 2**30) == "59.99GiB"
    assert byte_size(1536) == "1.5KiB"
    assert byte_size(0) == "0B"
    assert byte_size(2**40 - 2**20) == "1024GiB"


def test_stores_list_running_tikv_with_capacity_and_labels(
    world: FakeTidb, basic: None, http: httpx.Client, custom: client.CustomObjectsApi
) -> None:
    http.post("/sim/v1/load", json={"storage": {f"{NS}/basic": "120Gi"}})
    body = http.get(f"{PD}/pd/api/v1/stores").json()
    assert body["count"] == 3
    stores = sorted(body["stores"], key=lambda s: s["store"]["address"])
    assert stores[0]["store"]["address"] == f"basic-tikv-0.basic-tikv-peer.{NS}.svc:20160"
    assert stores[0]["store"]["state_name"] == "Up" and stores[0]["store"]["labels"] == []
    assert [s["status"]["capacity"] for s in stores] == ["100GiB"] * 3
    assert [s["status"]["available"] for s in stores] == ["60GiB"] * 3
    ids = {s["store"]["id"] for s in stores}
    assert len(ids) == 3
    one = http.get(f"{PD}/pd/api/v1/store/{stores[1]['store']['id']}").json()
    assert one["store"]["address"] == stores[1]["store"]["address"]
    assert http.get(f"{PD}/pd/api/v1/store/999").status_code == 404
    again = http.get(f"{PD}/pd/api/v1/stores").json()
    assert {s["store"]["id"] for s in again["stores"]} == ids  # ids are stable
    add_group(custom, http, 1, 4)
    labelled = [
        s for s in http.get(f"{PD}/pd/api/v1/stores").json()["stores"] if s["store"]["address"].startswith("auto-hot-")
    ]
    assert {"key": "group", "value": GROUP} in labelled[0]["store"]["labels"]


def test_scale_out_steps_one_instance_up_to_count(
    world: FakeTidb, basic: None, http: httpx.Client, custom: client.CustomObjectsApi
) -> None:
    world.load.set_demand(NS, "basic", "tikv", 5.9)  # 5.9 / 6 cores: over 0.8
    first = plans(http, strategy())
    assert first == [
        {
            "component": "tikv",
            "count": 1,
            "resource_type": "hot",
            "labels": {"group": GROUP, "resource-type": "hot", "specialUse": "hotRegion"},
        }
    ]
    add_group(custom, http, 1, 4)
    world.load.set_demand(NS, "basic", "tikv", 9.9)  # of 10 cores
    second = plans(http, strategy())
    assert [(p["labels"]["group"], p["count"]) for p in second] == [(GROUP, 2)]
    add_group(custom, http, 2, 5)
    world.load.set_demand(NS, "basic", "tikv", 13.9)  # of 14 cores, but count 2 is reached
    assert [(p["labels"]["group"], p["count"]) for p in plans(http, strategy())] == [(GROUP, 2)]
    # An absent count is unlimited.
    assert [p["count"] for p in plans(http, strategy(count=None))] == [3]


def test_in_band_returns_the_current_groups_and_low_usage_steps_down(
    world: FakeTidb, basic: None, http: httpx.Client, custom: client.CustomObjectsApi
) -> None:
    add_group(custom, http, 2, 5)  # quotas 2+2+2+4+4 = 14 cores
    world.load.set_demand(NS, "basic", "tikv", 7.0)
    assert [p["count"] for p in plans(http, strategy())] == [2]
    world.load.set_demand(NS, "basic", "tikv", 1.0)
    assert [p["count"] for p in plans(http, strategy())] == [1]
    add_group(custom, http, 1, 4)
    assert plans(http, strategy()) is None  # the last group is gone: PD writes null


def test_no_group_and_in_band_is_null_and_storage_is_ignored(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    world.load.set_demand(NS, "basic", "tikv", 3.0)
    http.post("/sim/v1/load", json={"storage": {f"{NS}/basic": "290Gi"}})  # far over storage max
    assert plans(http, strategy()) is None
    assert plans(http, {"rules": [], "resources": []}) is None


def test_tidb_rule_scales_tidb(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    world.load.set_demand(NS, "basic", "tidb", 3.9)  # of 4 cores
    answer = plans(http, strategy(component="tidb"))
    released = json.loads((Path(__file__).parents[2] / "conformance/tidb/pd_autoscaling.json").read_text())
    assert [set(p) for p in answer] == [set(released["response"][0])]  # PD's Plan keys, no more
    assert answer == [
        {
            "component": "tidb",
            "count": 1,
            "resource_type": "hot",
            "labels": {"group": "pd-auto-scaling-tidb", "resource-type": "hot"},
        }
    ]


def test_metrics_failure_answers_null_and_errors_answer_5xx(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    world.load.set_demand(NS, "basic", "tikv", 5.9)
    http.post("/sim/v1/faults", json={"pd": {"mode": "empty", "times": 1}})
    assert plans(http, strategy()) is None
    http.post("/sim/v1/faults", json={"pd": {"mode": "error", "times": 1, "status": 500}})
    assert http.post(f"{PD}/autoscaling", json=strategy()).status_code == 500
    assert plans(http, strategy()) is not None


def test_bad_requests(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    assert http.post(f"{PD}/autoscaling", content=b"{not json").status_code == 400
    assert http.post(f"{PD}/autoscaling", json=[1, 2]).status_code == 400
    assert http.post(f"/pd/{NS}/nope/autoscaling", json=strategy()).status_code == 404
    assert http.get(f"{PD}/pd/api/v1/nothing").status_code == 404


def test_external_recommender(world: FakeTidb, http: httpx.Client) -> None:
    params = {"name": "basic", "namespace": NS, "type": "tikv"}
    assert http.get("/external", params=params).status_code == 404
    http.post("/sim/v1/load", json={"external": {f"{NS}/basic/tikv": 7}})
    assert http.get("/external", params=params).json() == {
        "name": "basic",
        "namespace": NS,
        "type": "tikv",
        "recommendedReplicas": 7,
    }
    assert http.get("/external", params={"name": "basic"}).status_code == 400
    http.post("/sim/v1/faults", json={"external": {"mode": "error", "times": 1}})
    assert http.get("/external", params=params).status_code == 503
    assert http.get("/external", params=params).status_code == 200
