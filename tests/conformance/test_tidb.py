"""Components loop conformance: tidb-operator and PD formats, held as data in tests/conformance/tidb/ (each file names its
upstream source): growth's CRD declares what the released CRD declares, objects written for
tidb-operator parse, the strategy growth sends PD is the one tidb-operator sends, and PD's and a
recommender's answers are read as they are written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import yaml

from activities.components.external import recommended_replicas
from activities.components.pd import PdClient
from scaling.components.contracts import ComponentView, PdPlan, Shape
from scaling.components.groups import pd_strategy
from scaling.components.plan import PlanInput
from scaling.components.planners import plan_from_pd
from scaling.components.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "conformance" / "tidb"
BASE = {
    "tikv": ComponentView(replicas=3, cpu="1", memory="2Gi", storage="10Gi"),
    "tidb": ComponentView(replicas=2, cpu="1", memory="2Gi"),
}
TYPES = {"string": "string", "integer": "integer", "number": "number", "array": "array", "object": "object"}


def facts() -> dict[str, Any]:
    return yaml.safe_load((DATA / "crd_fields.yaml").read_text())


def objects() -> list[dict[str, Any]]:
    return yaml.safe_load((DATA / "autoscalers.yaml").read_text())


def _type(schema: dict[str, Any]) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    return TYPES[schema["type"]]


def _declares(schema: dict[str, Any], fields: dict[str, str], required: list[str], at: str) -> None:
    props = schema["properties"]
    for name, kind in fields.items():
        assert name in props, f"{at}.{name} is not declared"
        assert _type(props[name]) == kind, f"{at}.{name}: {_type(props[name])} != {kind}"
    assert sorted(schema.get("required", [])) == sorted(required), f"{at}: required keys differ"


def test_crd_declares_the_released_fields_names_and_required_keys() -> None:
    f = facts()
    crd = yaml.safe_load((ROOT / "deploy/crds/tidbclusterautoscaler.yaml").read_text())
    names = crd["spec"]["names"]
    for key in ("kind", "listKind", "plural", "singular", "shortNames"):
        assert names[key] == f["names"][key], key
    assert crd["spec"]["group"] == f["names"]["group"]
    version = crd["spec"]["versions"][0]
    assert version["name"] == f["names"]["version"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == f["spec"]["required"]
    cluster = f["spec"]["cluster"]
    _declares(spec["properties"]["cluster"], cluster["fields"], cluster["required"], "spec.cluster")
    comp = f["component"]
    for component in ("tikv", "tidb"):
        at = f"spec.{component}"
        props = spec["properties"][component]["properties"]
        for kind in ("resources", "rules"):
            item = props[kind]["additionalProperties"]
            _declares(item, comp[kind]["item_fields"], comp[kind]["item_required"], f"{at}.{kind}.*")
        for key in ("scaleInIntervalSeconds", "scaleOutIntervalSeconds"):
            assert _type(props[key]) == comp[key]
        ext = props["external"]
        _declares(ext, comp["external"]["fields"], comp["external"]["required"], f"{at}.external")
        ep = ext["properties"]["endpoint"]
        _declares(ep, comp["external"]["endpoint"]["fields"], comp["external"]["endpoint"]["required"], f"{at}.ep")
        tls = comp["external"]["endpoint"]["tlsSecret"]
        _declares(ep["properties"]["tlsSecret"], tls["fields"], tls["required"], f"{at}.ep.tlsSecret")


def test_objects_written_for_tidb_operator_parse() -> None:
    parsed = []
    for obj in objects():
        spec, errors = parse_spec(obj["spec"], obj["metadata"].get("namespace", "tidb"), BASE)
        assert errors == {}, obj["metadata"]["name"]
        parsed.append(spec)
    example, defaulted, mixed = parsed
    assert example.components["tidb"].rules["cpu"].min_threshold == 0.2
    assert defaulted.components["tidb"].rules["cpu"].min_threshold == 0.1  # tidb-operator's default
    assert example.components["tidb"].resources["small"].cpu_milli == 1000
    tidb = mixed.components["tidb"]
    assert tidb.resources["compute"].storage == "" and tidb.external.max_replicas == 5
    assert (tidb.external.endpoint.tls_secret.name, tidb.external.endpoint.tls_secret.namespace) == (
        "recommender-client",
        "tidb",
    )


def test_strategy_is_what_tidb_operator_sends_pd() -> None:
    pd = json.loads((DATA / "pd_autoscaling.json").read_text())
    spec, _ = parse_spec(objects()[2]["spec"], "tidb", BASE)
    # tidb's external recommender keeps it out of PD's request, as tidb-operator's syncExternal does.
    assert pd_strategy(spec).model_dump(exclude_none=True) == pd["request"]


def test_pd_answer_is_read_as_pd_writes_it() -> None:
    pd = json.loads((DATA / "pd_autoscaling.json").read_text())
    answers = iter([pd["response"], pd["response_no_plan"]])
    transport = httpx.MockTransport(lambda r: httpx.Response(200, content=json.dumps(next(answers)).encode()))
    client = PdClient("http://pd:2379", transport=transport)
    plans = client.autoscaling(pd["request"])
    assert client.autoscaling(pd["request"]) is None  # null: undecidable, never "no groups"
    spec, _ = parse_spec(objects()[2]["spec"], "tidb", BASE)
    inp = PlanInput(
        namespace="tidb",
        autoscaler="auto-scaling-demo",
        base_cluster="auto-scaling-demo",
        spec=spec.components["tikv"],
        homogeneous_replicas=3,
        homogeneous_shape=Shape(cpu_milli=1000, memory_bytes=2 << 30),
    )
    plan = plan_from_pd(inp, [PdPlan(**p) for p in plans])
    [change] = plan.changes
    assert change.create and change.to_replicas == 1 and change.labels == pd["response"][0]["labels"]
    assert (change.cpu, change.memory, change.storage) == ("1000m", "2Gi", "10Gi")


def test_external_query_and_answer() -> None:
    ext = json.loads((DATA / "external.json").read_text())
    asked: list[dict[str, str]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(dict(request.url.params))
        return httpx.Response(200, json=ext["response"])

    q = ext["query"]
    got = recommended_replicas(
        "http://rec:8080/recommend", q["namespace"], q["name"], q["type"], transport=httpx.MockTransport(answer)
    )
    assert got == ext["response"]["recommendedReplicas"] and asked == [q]
