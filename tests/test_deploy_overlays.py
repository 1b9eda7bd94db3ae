"""deploy/ as kustomize renders it: the base and each overlay (kwok demo, Hetzner production, fleet,
components) through `kubectl kustomize`, every built-in object checked against the Kubernetes
1.30-1.34 schemas (kubernetes-validate, strict: an unknown field is an error), growth's and
tidb-operator's objects against their CRDs' own openAPIV3Schema, the worker's settings loaded as
the worker loads them, and the monitoring objects against what they point at. Skipped without
kubectl (saying so); tests/test_deploy_files.py checks the files themselves."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from activities.settings import load_settings
from starters import monitoring

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if (p / "kustomization.yaml").exists())
KUBERNETES = ["1.30.0", "1.31.0", "1.32.0", "1.33.0", "1.34.0"]
CRD_FILES = sorted(p for p in (DEPLOY / "crds").glob("*.yaml") if p.name != "kustomization.yaml")
MONITORING_GROUP = "monitoring.coreos.com"  # prometheus-operator's: its CRDs are not vendored here


def _has_kustomize() -> bool:
    if shutil.which("kubectl") is None:
        return False
    return subprocess.run(["kubectl", "kustomize", "--help"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _has_kustomize(), reason="no kubectl with `kubectl kustomize` on PATH")


@functools.cache
def render(overlay: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / "overlays" / overlay)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@functools.cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the served version's openAPIV3Schema, from deploy/crds/."""
    out = {}
    for path in CRD_FILES:
        for crd in yaml.safe_load_all(path.read_text()):
            spec = crd["spec"]
            for v in spec["versions"]:
                out[(f"{spec['group']}/{v['name']}", spec["names"]["kind"])] = v["schema"]["openAPIV3Schema"]
    return out


def crd_backed(doc: dict[str, Any]) -> bool:
    return doc["apiVersion"].split("/")[0] in {k[0].split("/")[0] for k in crd_schemas()}


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return found


def test_there_is_an_overlay_per_case() -> None:
    assert OVERLAYS == ["components", "fleet", "hetzner-production", "kwok-demo"]


def test_built_in_objects_match_the_kubernetes_schemas() -> None:
    """Every overlay's objects, each distinct one once (the base's are in all four)."""
    unique: dict[str, tuple[str, dict[str, Any]]] = {}
    for overlay in OVERLAYS:
        for d in render(overlay):
            if not crd_backed(d) and not d["apiVersion"].startswith(MONITORING_GROUP):
                unique.setdefault(json.dumps(d, sort_keys=True), (overlay, d))
    assert {d["kind"] for _, d in unique.values()} >= {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "Deployment",
        "Service",
    }
    for version in KUBERNETES:
        for overlay, doc in unique.values():
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as err:
                raise AssertionError(f"{overlay} {doc['kind']}/{doc['metadata']['name']} on {version}: {err}") from None
    # Strict: a misspelt field is refused, not ignored as the API server's default would.
    deploy = one(render("kwok-demo"), "Deployment")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({**deploy, "spec": {**deploy["spec"], "replica": 1}}, KUBERNETES[-1], strict=True)


def test_growths_and_tidb_operators_objects_match_their_crds() -> None:
    examples = [d for p in sorted((DEPLOY / "examples").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]
    checked = [d for d in examples if crd_backed(d)]
    assert {d["kind"] for d in checked} == {"NodeGroupWithPriority", "TidbClusterAutoScaler"}
    for doc in checked:
        schema = crd_schemas()[(doc["apiVersion"], doc["kind"])]
        jsonschema.validate(doc, schema)
    # The schemas are real checks: a value out of its range is refused.
    bad = {**checked[0], "spec": {**checked[0]["spec"], "approval": {"nodesAbove": -1}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, crd_schemas()[(bad["apiVersion"], bad["kind"])])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_runs_a_worker_with_settings_that_load(overlay: str, tmp_path: Path) -> None:
    docs = render(overlay)
    deploy, cm = one(docs, "Deployment"), one(docs, "ConfigMap")
    (file,) = cm["data"]
    (tmp_path / file).write_text(cm["data"][file])
    settings = load_settings(str(tmp_path / file))
    assert settings.kubernetes.in_cluster
    volumes = {v["name"] for v in deploy["spec"]["template"]["spec"]["volumes"]}
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    mounted = {m["mountPath"] for m in container["volumeMounts"] if m["name"] in volumes}
    for path in _secret_files(yaml.safe_load(cm["data"][file])):
        assert any(path.startswith(m + "/") for m in mounted), f"{overlay}: {path} is in no mounted volume"
    if overlay == "kwok-demo":
        assert set(settings.providers) == {"kwok"} and deploy["spec"]["replicas"] == 1
    if overlay == "fleet":
        assert settings.fleet is not None
        port = int(settings.fleet.agent_api.bind.rsplit(":", 1)[1])
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        service = one(docs, "Service", "growth-agent-api")
        assert ports[service["spec"]["ports"][0]["targetPort"]] == port
    if overlay == "components":
        assert settings.components.prometheus_url and "{cluster}" in settings.components.pd_url


def _secret_files(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [
            v if isinstance(v, str) else x
            for k, v in node.items()
            for x in ([v] if k.endswith("_file") and isinstance(v, str) else _secret_files(v))
        ]
    if isinstance(node, list):
        return [x for v in node for x in _secret_files(v)]
    return []


@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if o != "kwok-demo"])
def test_monitoring_objects_point_at_the_worker_and_carry_the_rules(overlay: str) -> None:
    docs = render(overlay)
    monitor, rule = one(docs, "ServiceMonitor"), one(docs, "PrometheusRule")
    service = one(docs, "Service", "growth-worker")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    deploy = one(docs, "Deployment")
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    metrics_port = {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"]
    assert deploy["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == str(metrics_port)
    # The PrometheusRule is alerts.rules.yaml, which promtool checks and tests (tests/test_monitoring.py).
    assert rule["spec"]["groups"] == monitoring.rule_groups()
