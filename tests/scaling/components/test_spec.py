"""TidbClusterAutoScaler spec: defaulting as seed 002 and tidb-operator say (no resources: one type
with the base cluster's requests; a cpu rule without min_threshold: 0.1), validation with
field-named errors."""

from __future__ import annotations

import pytest

from scaling.components.contracts import ComponentView, ExternalEndpoint
from scaling.components.spec import DEFAULT_CPU_MIN_THRESHOLD, DEFAULT_SCALE_IN_S, DEFAULT_SCALE_OUT_S, parse_spec

BASE = {
    "tikv": ComponentView(replicas=3, cpu="2", memory="4Gi", storage="100Gi"),
    "tidb": ComponentView(replicas=2, cpu="1", memory="2Gi"),
}


def spec(**components: object) -> dict:
    return {"cluster": {"name": "db"}, **components}


def test_defaults_resources_from_the_base_cluster_and_rule_types_from_resources() -> None:
    parsed, errors = parse_spec(spec(tikv={"rules": {"cpu": {"max_threshold": 0.8, "min_threshold": 0.2}}}), "ns", BASE)
    assert errors == {}
    tikv = parsed.components["tikv"]
    res = tikv.resources["default_tikv"]
    assert (res.cpu, res.memory, res.storage, res.count) == ("2", "4Gi", "100Gi", None)
    assert tikv.rules["cpu"].resource_types == ["default_tikv"]
    assert (
        (tikv.scale_in_interval_s, tikv.scale_out_interval_s) == (DEFAULT_SCALE_IN_S, DEFAULT_SCALE_OUT_S) == (500, 300)
    )
    assert parsed.cluster_name == "db" and parsed.cluster_namespace == "ns"


def test_rule_without_resource_types_gets_every_declared_type() -> None:
    raw = spec(
        tidb={
            "resources": {"big": {"cpu": "8", "memory": "16Gi", "count": 2}, "small": {"cpu": "2", "memory": "4Gi"}},
            "rules": {"cpu": {"max_threshold": 0.7, "min_threshold": 0.1}},
            "scaleOutIntervalSeconds": 60,
        }
    )
    parsed, errors = parse_spec(raw, "ns", BASE)
    assert errors == {}
    tidb = parsed.components["tidb"]
    assert sorted(tidb.rules["cpu"].resource_types) == ["big", "small"]
    assert [r.name for r in tidb.preferred_types(tidb.rules["cpu"])] == ["big", "small"]
    assert tidb.scale_out_interval_s == 60 and tidb.resources["big"].count == 2


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"max_threshold": 0.5, "min_threshold": 0.5}, "spec.tikv.rules.cpu.min_threshold"),
        ({"max_threshold": 0.5, "min_threshold": 0.7}, "spec.tikv.rules.cpu.min_threshold"),
        ({"max_threshold": 0.5, "min_threshold": -0.1}, "spec.tikv.rules.cpu.min_threshold"),
        ({"max_threshold": 1.2, "min_threshold": 0.1}, "spec.tikv.rules.cpu.max_threshold"),
        ({"max_threshold": 0, "min_threshold": 0}, "spec.tikv.rules.cpu.max_threshold"),
        ({"min_threshold": 0.1}, "spec.tikv.rules.cpu.max_threshold"),
        ({"max_threshold": 0.05}, "spec.tikv.rules.cpu.max_threshold"),  # under the default min 0.1
        ({"max_threshold": "high", "min_threshold": 0.1}, "spec.tikv.rules.cpu.max_threshold"),
        (
            {"max_threshold": 0.8, "min_threshold": 0.1, "resource_types": ["nope"]},
            "spec.tikv.rules.cpu.resource_types",
        ),
    ],
)
def test_bad_thresholds_are_reported_with_their_field(rule: dict, field: str) -> None:
    parsed, errors = parse_spec(spec(tikv={"rules": {"cpu": rule}}), "ns", BASE)
    assert [e.field for e in errors["tikv"]] == [field]
    assert "tikv" not in parsed.components


def test_thresholds_at_the_bounds_are_valid() -> None:
    parsed, errors = parse_spec(spec(tikv={"rules": {"cpu": {"max_threshold": 1, "min_threshold": 0}}}), "ns", BASE)
    assert errors == {} and parsed.components["tikv"].rules["cpu"].target == 0.5


def test_one_bad_component_leaves_the_other_working() -> None:
    raw = spec(
        tikv={"rules": {"cpu": {"max_threshold": 0.3, "min_threshold": 0.6}}},
        tidb={"rules": {"cpu": {"max_threshold": 0.8, "min_threshold": 0.2}}},
    )
    parsed, errors = parse_spec(raw, "ns", BASE)
    assert list(errors) == ["tikv"] and list(parsed.components) == ["tidb"]


@pytest.mark.parametrize(
    ("component", "field"),
    [
        ({"rules": {"memory": {"max_threshold": 0.8, "min_threshold": 0.1}}}, "spec.tikv.rules.memory"),
        ({"resources": {"a": {"cpu": "2", "memory": "4Gi", "count": -1}}}, "spec.tikv.resources.a.count"),
        ({"resources": {"a": {"cpu": "two", "memory": "4Gi"}}}, "spec.tikv.resources.a.cpu"),
        ({"resources": {"a": {"cpu": "2"}}}, "spec.tikv.resources.a.memory"),
        (
            {"rules": {"cpu": {"max_threshold": 0.8, "min_threshold": 0.1}}, "scaleInIntervalSeconds": -5},
            "spec.tikv.scaleInIntervalSeconds",
        ),
        ({"external": {"endpoint": {"host": "rec", "port": 80}}}, "spec.tikv.external.maxReplicas"),
        ({"external": {"endpoint": {"host": "rec"}, "maxReplicas": 3}}, "spec.tikv.external.endpoint"),
        ({}, "spec.tikv.rules"),
    ],
)
def test_other_invalid_fields(component: dict, field: str) -> None:
    _, errors = parse_spec(spec(tikv=component), "ns", BASE)
    assert field in [e.field for e in errors["tikv"]]


def test_cpu_min_threshold_defaults_to_tidb_operators_value() -> None:
    # tidb-operator's defaultBasicAutoScaler sets a missing cpu min_threshold to 0.1.
    parsed, errors = parse_spec(spec(tikv={"rules": {"cpu": {"max_threshold": 0.8}}}), "ns", BASE)
    assert errors == {}
    rule = parsed.components["tikv"].rules["cpu"]
    assert rule.min_threshold == DEFAULT_CPU_MIN_THRESHOLD == 0.1 and rule.target == pytest.approx(0.45)


def test_storage_on_a_tidb_resource_type_is_accepted_and_ignored() -> None:
    raw = spec(
        tidb={
            "resources": {"s": {"cpu": "1", "memory": "2Gi", "storage": "10Gi"}},
            "rules": {"cpu": {"max_threshold": 0.8}},
        }
    )
    parsed, errors = parse_spec(raw, "ns", BASE)
    assert errors == {} and parsed.components["tidb"].resources["s"].storage == ""


def test_max_homogeneous_replicas() -> None:
    rules = {"cpu": {"max_threshold": 0.8}}
    parsed, errors = parse_spec(spec(tikv={"rules": rules, "maxHomogeneousReplicas": 5}), "ns", BASE)
    assert errors == {} and parsed.components["tikv"].max_homogeneous_replicas == 5
    parsed, _ = parse_spec(spec(tikv={"rules": rules}), "ns", BASE)
    assert parsed.components["tikv"].max_homogeneous_replicas is None
    _, errors = parse_spec(spec(tikv={"rules": rules, "maxHomogeneousReplicas": -1}), "ns", BASE)
    assert [e.field for e in errors["tikv"]] == ["spec.tikv.maxHomogeneousReplicas"]


def test_tls_secret_is_a_secret_ref() -> None:
    ext = {"endpoint": {"host": "rec", "port": 443, "path": "/r", "tlsSecret": {"name": "rec-tls", "namespace": "ops"}}}
    parsed, errors = parse_spec(spec(tikv={"external": {**ext, "maxReplicas": 3}}), "ns", BASE)
    assert errors == {}
    secret = parsed.components["tikv"].external.endpoint.tls_secret
    assert (secret.name, secret.namespace) == ("rec-tls", "ops")
    for bad in ("rec-tls", {"name": "rec-tls"}):
        ext["endpoint"]["tlsSecret"] = bad
        _, errors = parse_spec(spec(tikv={"external": {**ext, "maxReplicas": 3}}), "ns", BASE)
        assert [e.field for e in errors["tikv"]] == ["spec.tikv.external.endpoint.tlsSecret"]


def test_storage_rule_is_tikv_only_and_min_is_optional() -> None:
    _, errors = parse_spec(spec(tidb={"rules": {"storage": {"max_threshold": 0.8}}}), "ns", BASE)
    assert errors["tidb"][0].field == "spec.tidb.rules.storage"
    parsed, errors = parse_spec(spec(tikv={"rules": {"storage": {"max_threshold": 0.8}}}), "ns", BASE)
    assert errors == {} and parsed.components["tikv"].rules["storage"].target == 0.8


def test_missing_cluster_and_defaults_without_base_requests() -> None:
    parsed, errors = parse_spec({"tikv": {}}, "ns", BASE)
    assert parsed is None and errors[""][0].field == "spec.cluster.name"
    no_requests = {"tikv": ComponentView(replicas=3)}
    _, errors = parse_spec(
        spec(tikv={"rules": {"cpu": {"max_threshold": 0.8, "min_threshold": 0.1}}}), "ns", no_requests
    )
    assert errors["tikv"][0].field == "spec.tikv.resources"


def test_external_config() -> None:
    raw = spec(tikv={"external": {"endpoint": {"host": "rec", "port": 8080, "path": "/r"}, "maxReplicas": 7}})
    parsed, errors = parse_spec(raw, "ns", BASE)
    assert errors == {}
    ext = parsed.components["tikv"].external
    assert (ext.endpoint.host, ext.endpoint.port, ext.endpoint.path, ext.max_replicas) == ("rec", 8080, "/r", 7)


def test_an_activity_input_from_before_tls_secret_was_a_secret_ref_still_reads() -> None:
    old = {"host": "rec", "port": 80, "path": "/", "tls_secret": ""}
    assert ExternalEndpoint.model_validate(old).tls_secret is None
