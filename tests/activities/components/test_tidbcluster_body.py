"""The heterogeneous TidbCluster body: the base spec reduced to one component, joined to the
base, with the group's resources, server labels and tidb-operator's object labels."""

from __future__ import annotations

import pytest

from activities.components.tidbcluster import auto_cluster_body
from tests.sim.tidb.conftest import tc_body


def base() -> dict:
    body = tc_body("basic", tikv_config={"log-level": "info", "server": {"labels": {"zone": "a"}}})
    body["metadata"]["namespace"] = "db"
    body["spec"]["tiflash"] = {"replicas": 1}
    body["spec"]["timezone"] = "UTC"
    return body


def test_tikv_group_body() -> None:
    body = auto_cluster_body(
        base(),
        name="auto-bcd",
        autoscaler="tas",
        component="tikv",
        group="auto-bcd",
        replicas=2,
        cpu="8",
        memory="16Gi",
        labels={"group": "g1", "specialUse": "hotRegion"},
    )
    assert body["metadata"] == {
        "name": "auto-bcd",
        "namespace": "db",
        "labels": {
            "tidb.pingcap.com/auto-instance": "tas",
            "tidb.pingcap.com/auto-component": "tikv",
            "tidb.pingcap.com/autoscaling-group": "auto-bcd",
            "tidb.pingcap.com/base-tc": "basic",
        },
    }
    spec = body["spec"]
    assert set(spec) == {"version", "tikv", "cluster", "timezone"}
    assert spec["cluster"] == {"name": "basic", "namespace": "db"}
    assert spec["tikv"]["replicas"] == 2
    assert spec["tikv"]["requests"] == {"cpu": "8", "memory": "16Gi", "storage": "100Gi"}  # storage from the base
    assert spec["tikv"]["limits"] == {"cpu": "8", "memory": "16Gi"}
    assert spec["tikv"]["config"] == {
        "log-level": "info",
        "server": {"labels": {"zone": "a", "group": "g1", "specialUse": "hotRegion"}},
    }


def test_tidb_group_body_and_the_base_is_untouched() -> None:
    original = base()
    body = auto_cluster_body(
        original,
        name="auto-x",
        autoscaler="tas",
        component="tidb",
        group="auto-x",
        replicas=1,
        cpu="2",
        memory="4Gi",
        storage="1Ti",
        labels={"group": "g2"},
    )
    assert set(body["spec"]) == {"version", "tidb", "cluster", "timezone"}
    assert body["spec"]["tidb"]["requests"] == {"cpu": "2", "memory": "4Gi"}  # no storage for tidb
    assert body["spec"]["tidb"]["config"] == {"labels": {"group": "g2"}}
    assert original == base()


def small_tikv(b: dict) -> dict:
    return auto_cluster_body(
        b,
        name="n",
        autoscaler="t",
        component="tikv",
        group="n",
        replicas=1,
        cpu="1",
        memory="1Gi",
        labels={"group": "g"},
    )


def test_toml_config_gets_a_labels_table() -> None:
    b = base()
    b["spec"]["tikv"]["config"] = 'log-level = "info"\n'
    assert small_tikv(b)["spec"]["tikv"]["config"] == 'log-level = "info"\n\n[server.labels]\n"group" = "g"\n'
    b["spec"]["tikv"]["config"] = '[server.labels]\nzone = "a"\n'
    with pytest.raises(ValueError, match="server.labels"):
        small_tikv(b)


def test_missing_component_in_base_is_refused() -> None:
    b = base()
    del b["spec"]["tidb"]
    with pytest.raises(ValueError, match="spec.tidb"):
        auto_cluster_body(b, name="n", autoscaler="t", component="tidb", group="n", replicas=1, cpu="1", memory="1Gi")
