"""deploy/crds' pingcap.com CRDs and the example autoscaler agree with the spec parser."""

from __future__ import annotations

from pathlib import Path

import yaml

from scaling.components.contracts import ComponentView
from scaling.components.spec import parse_spec

ROOT = Path(__file__).resolve().parents[3]


def load(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text())


def test_crds_are_tidb_operators_names() -> None:
    for path, plural, kind, short in [
        ("deploy/crds/tidbclusterautoscaler.yaml", "tidbclusterautoscalers", "TidbClusterAutoScaler", "ta"),
        ("deploy/crds/tidbcluster.yaml", "tidbclusters", "TidbCluster", "tc"),
    ]:
        crd = load(path)
        spec = crd["spec"]
        assert crd["metadata"]["name"] == f"{plural}.pingcap.com" and spec["group"] == "pingcap.com"
        assert (spec["names"]["plural"], spec["names"]["kind"], spec["names"]["shortNames"]) == (plural, kind, [short])
        assert spec["scope"] == "Namespaced"
        assert [v["name"] for v in spec["versions"] if v["served"] and v["storage"]] == ["v1alpha1"]
        assert "subresources" not in spec["versions"][0]  # as released: status is written with the object


def test_schema_declares_every_field_the_parser_reads() -> None:
    schema = load("deploy/crds/tidbclusterautoscaler.yaml")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]["properties"]
    for component in ("tikv", "tidb"):
        props = spec[component]["properties"]
        assert {"resources", "rules", "scaleInIntervalSeconds", "scaleOutIntervalSeconds", "external"} <= set(props)
        assert set(props["rules"]["additionalProperties"]["properties"]) == {
            "max_threshold",
            "min_threshold",
            "resource_types",
        }
        assert {"cpu", "memory", "storage", "count"} == set(props["resources"]["additionalProperties"]["properties"])
        assert {"endpoint", "maxReplicas"} == set(props["external"]["properties"])


def test_example_autoscaler_is_valid() -> None:
    obj = load("deploy/examples/tidbclusterautoscaler.yaml")
    base = {
        "tikv": ComponentView(replicas=3, cpu="2", memory="8Gi", storage="100Gi"),
        "tidb": ComponentView(replicas=2, cpu="2", memory="4Gi"),
    }
    parsed, errors = parse_spec(obj["spec"], obj["metadata"]["namespace"], base)
    assert errors == {}
    tikv = parsed.components["tikv"]
    assert [r.name for r in tikv.preferred_types(tikv.rules["cpu"])] == ["compute_large", "storage_small"]
    assert list(parsed.components["tidb"].resources) == ["default_tidb"]
