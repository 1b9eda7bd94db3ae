"""NodeGroupWithPriority and TidbClusterAutoScaler objects a user can write, through the parsers
the loops use (scaling.nodes.nodegroups, scaling.components.spec): objects drawn from the CRDs'
own schemas (deploy/crds; drawn by schemathesis's JSON Schema strategies through its public API,
the schema as a request body: hypothesis-jsonschema 0.23 fails on current hypothesis, "'many'
object has no attribute 'more'") and objects with any JSON value at the fields those schemas type. Never an exception other than the parser's own refusal, every refusal
names a field, and what the CRD's structural schema refuses the parser refuses too (the API
server would never store it; a file-fed worker, node_groups_file, must not take it either).
Bounded and seeded (derandomized)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from schemathesis import openapi

from scaling.components.spec import parse_spec
from scaling.nodes.nodegroups import MAX_SPEC_BYTES, load_node_groups

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"
PROVIDERS = {"kwok", "hetzner"}
FUZZ = hsettings(
    max_examples=40, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)


def structural(schema: Any) -> Any:
    """A CRD's openAPIV3Schema as plain JSON Schema: int-or-string is either; the apiserver's
    other x-kubernetes-* keys change nothing a validator checks."""
    if isinstance(schema, list):
        return [structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("x-kubernetes-int-or-string"):
        return {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    out = {k: structural(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    out.pop("format", None)  # int32 and friends: hypothesis-jsonschema draws them unbounded
    return out


def pruned(value: Any) -> Any:
    """What the apiserver validates: a field set to null is dropped first (fields that are not
    `nullable: true` are pruned of nulls before defaulting and validation)."""
    if isinstance(value, dict):
        return {k: pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [pruned(v) for v in value]
    return value


def refused_by_crd(schema: dict[str, Any], spec: Any) -> bool:
    return not jsonschema.Draft7Validator(schema).is_valid(pruned(spec))


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid for `schema`: the body of an operation that takes it."""
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "crd", "version": "1"},
        "paths": {"/o": {"post": {
            "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
            "responses": {"200": {"description": "ok"}},
        }}},
    }  # fmt: skip
    (operation,) = [r.ok() for r in openapi.from_dict(doc).get_all_operations()]
    return operation.as_strategy().map(lambda case: case.body)


def spec_schema(crd: str) -> dict[str, Any]:
    doc = yaml.safe_load((CRDS / crd).read_text())
    return structural(doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"])


NGWP_SPEC = spec_schema("nodegroupwithpriority.yaml")
TCAS_SPEC = spec_schema("tidbclusterautoscaler.yaml")
VALID_GROUP = next(d for d in yaml.safe_load_all((EXAMPLES / "nodegroups.yaml").read_text()) if d["metadata"]["name"] == "kwok")  # fmt: skip
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def group(spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": VALID_GROUP["apiVersion"],
        "kind": VALID_GROUP["kind"],
        "metadata": {"name": "g"},
        "spec": spec,
    }


def parsed_group(spec: Any) -> list[str]:
    """The fields the parser names (none: accepted); it must not raise."""
    groups, problems = load_node_groups([group(spec)], PROVIDERS)
    assert len(groups) + len(problems) == 1
    for p in problems:
        assert p.field and p.message, p
    return [p.field for p in problems]


@FUZZ
@given(spec=from_schema(NGWP_SPEC))
def test_node_groups_from_the_crd_schema_never_crash_and_refusals_name_the_field(spec: dict[str, Any]) -> None:
    parsed_group(spec)


# Each field the CRD types, and where it sits in a valid group.
NGWP_TYPED = [
    ("limits", "pricePerHour"),
    ("approval", "nodesAbove"),
    ("approval", "pricePerHourAbove"),
    ("approval", "timeout"),
    ("approval", "default"),
    ("pools.0.billing", "period"),
    ("pools.0.billing", "margin"),
]


def put(obj: dict[str, Any], where: str, key: str, value: Any) -> None:
    for part in where.split("."):
        obj = obj[int(part)] if part.isdigit() else obj.setdefault(part, {})
    obj[key] = value


@FUZZ
@given(field=st.sampled_from(NGWP_TYPED), value=JSON)
def test_what_the_crd_refuses_the_node_group_parser_refuses(field: tuple[str, str], value: Any) -> None:
    spec = copy.deepcopy(VALID_GROUP["spec"])
    put(spec, *field, value)
    if refused_by_crd(NGWP_SPEC, spec):
        assert parsed_group(spec), f"the CRD refuses spec.{field[0]}.{field[1]} = {value!r}; the parser took it"


def test_a_huge_node_group_is_refused_naming_spec() -> None:
    spec = copy.deepcopy(VALID_GROUP["spec"])
    spec["pools"][0]["config"] = {"blob": "x" * 2_000_000}
    assert parsed_group(spec) == ["spec"]
    assert len(json.dumps(VALID_GROUP["spec"])) < MAX_SPEC_BYTES


def parsed_autoscaler(spec: Any) -> list[str]:
    result, errors = parse_spec(spec, "db", {})
    fields = [e.field for problems in errors.values() for e in problems]
    assert all(fields), errors
    assert result is not None or fields
    return fields


@FUZZ
@given(spec=from_schema(TCAS_SPEC))
def test_autoscalers_from_the_crd_schema_never_crash_and_refusals_name_the_field(spec: dict[str, Any]) -> None:
    parsed_autoscaler(spec)


VALID_TCAS = yaml.safe_load((EXAMPLES / "tidbclusterautoscaler.yaml").read_text())["spec"]
TCAS_TYPED = [
    ("cluster", "name"),
    ("tikv", "scaleInIntervalSeconds"),
    ("tikv", "scaleOutIntervalSeconds"),
    ("tikv", "maxHomogeneousReplicas"),
    ("tikv.rules.cpu", "max_threshold"),
    ("tikv.rules.cpu", "min_threshold"),
    ("tikv.rules.cpu", "resource_types"),
]


@FUZZ
@given(field=st.sampled_from(TCAS_TYPED), value=JSON)
def test_what_the_crd_refuses_the_autoscaler_parser_refuses(field: tuple[str, str], value: Any) -> None:
    spec = copy.deepcopy(VALID_TCAS)
    put(spec, *field, value)
    if refused_by_crd(TCAS_SPEC, spec):
        assert parsed_autoscaler(spec), f"the CRD refuses spec.{field[0]}.{field[1]} = {value!r}; the parser took it"


def test_a_huge_autoscaler_is_refused_naming_spec() -> None:
    spec = copy.deepcopy(VALID_TCAS)
    spec["tikv"]["blob"] = "x" * 2_000_000
    assert parsed_autoscaler(spec) == ["spec"]


@pytest.mark.parametrize("crd", ["nodegroupwithpriority.yaml", "tidbclusterautoscaler.yaml"])
def test_the_examples_fit_their_crds(crd: str) -> None:
    schema = NGWP_SPEC if crd.startswith("node") else TCAS_SPEC
    spec = VALID_GROUP["spec"] if crd.startswith("node") else VALID_TCAS
    jsonschema.Draft7Validator(schema).validate(spec)
