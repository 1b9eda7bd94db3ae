"""The files users run growth with outside the local default: docker-compose.yml, Dockerfile and
the manifests in deploy/. These machines have no Docker or real cluster, so their structure is
checked here against the code they configure (settings, CRD constants, what activities call)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from activities.nodes.kube import NODE_GROUP_PLURAL
from activities.nodes.providers.hetzner import HetznerSettings
from activities.settings import Settings, load_settings
from scaling.kube.models import Resources
from scaling.nodes.models import CRD_GROUP, CRD_VERSION
from scaling.nodes.nodegroups import KIND, flatten_pools, parse_node_groups_yaml, priority_tiers
from starters.processes import SEARCH_ATTRIBUTES
from workflows.search import ALL as SEARCH_KEYS

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
# deploy/ files that are not Kubernetes manifests.
NOT_MANIFESTS = {
    DEPLOY / "growth.example.yaml",
    *(DEPLOY / "compose").glob("*"),
    *DEPLOY.rglob("kustomization.yaml"),  # kustomize's own files (tests/test_deploy_overlays.py)
    DEPLOY / "monitoring" / "alerts.rules.yaml",  # a Prometheus rule file and its promtool tests
    DEPLOY / "monitoring" / "alerts.test.yaml",
}


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def manifests() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*.yaml") if p not in NOT_MANIFESTS)


def find(kind: str, path: Path | None = None) -> list[dict[str, Any]]:
    paths = [path] if path else manifests()
    return [d for p in paths for d in docs(p) if d.get("kind") == kind]


# -- docker-compose.yml -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def published(service: dict[str, Any]) -> dict[int, int]:
    """host port -> container port"""
    out = {}
    for spec in service.get("ports", []):
        host, container = str(spec).rsplit(":", 2)[-2:]
        out[int(host)] = int(container)
    return out


def depends_on(service: dict[str, Any]) -> set[str]:
    dep = service.get("depends_on", [])
    return set(dep) if isinstance(dep, (list, dict)) else set()


def env(service: dict[str, Any]) -> dict[str, str]:
    e = service.get("environment", {})
    if isinstance(e, list):
        e = dict(item.split("=", 1) for item in e)
    return {k: str(v) for k, v in e.items()}


def mounts(service: dict[str, Any]) -> dict[str, Path]:
    """container path -> host path, for bind mounts of repo files."""
    out = {}
    for v in service.get("volumes", []):
        src, target = v.split(":")[:2]
        if src.startswith("."):
            out[target] = ROOT / src
    return out


def test_compose_has_the_five_parts(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"temporal", "postgresql", "temporal-ui", "kwok", "worker"} <= set(services)
    assert services["kwok"]["image"].startswith("registry.k8s.io/kwok/cluster:")
    assert re.match(r"temporalio/(auto-setup|server):\d", services["temporal"]["image"])
    assert services["temporal-ui"]["image"].startswith("temporalio/ui:")
    assert services["postgresql"]["image"].startswith("postgres:")
    for name, svc in services.items():
        assert ":latest" not in svc.get("image", ""), f"{name}: pin the image"


def test_compose_temporal_uses_postgresql(compose: dict[str, Any]) -> None:
    s = compose["services"]
    temporal, pg = env(s["temporal"]), env(s["postgresql"])
    assert temporal["DB"].startswith("postgres")
    assert temporal["POSTGRES_SEEDS"] == "postgresql"
    assert temporal["POSTGRES_USER"] == pg["POSTGRES_USER"]
    assert temporal["POSTGRES_PWD"] == pg["POSTGRES_PASSWORD"]
    assert "postgresql" in depends_on(s["temporal"])
    assert published(s["temporal"]) == {7233: 7233}
    # The UI talks to the frontend by service name, and is on the port the dev server's UI uses.
    assert env(s["temporal-ui"])["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert "temporal" in depends_on(s["temporal-ui"])
    assert published(s["temporal-ui"]) == {8233: 8080}
    assert published(s["kwok"]) == {8080: 8080}


def test_compose_registers_growths_search_attributes(compose: dict[str, Any]) -> None:
    setup = compose["services"]["temporal-setup"]
    command = " ".join(setup["command"]) if isinstance(setup["command"], list) else setup["command"]
    assert "--address temporal:7233" in command
    registered = set(re.findall(r"--name (\w+)", command))
    assert registered == set(SEARCH_ATTRIBUTES) == {k.name for k in SEARCH_KEYS}
    assert "--type Keyword" in command


def test_compose_worker_points_at_the_compose_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    worker = services["worker"]
    assert worker["build"] == "." and (ROOT / "Dockerfile").exists()
    command = worker["command"]
    assert command[0] == "growth-worker"
    config_target = command[command.index("--config") + 1]
    files = mounts(worker)
    assert config_target in files, "the settings file the worker reads is mounted"
    for target, source in files.items():
        assert source.is_file(), f"{source} (mounted at {target}) exists"
    assert env(worker)["GROWTH_CONFIG"] == config_target  # so `growth` finds it in the container
    assert {"kwok"} <= depends_on(worker)
    assert "temporal" in depends_on(worker) | depends_on(services["temporal-setup"])

    settings: Settings = load_settings(str(files[config_target]))
    host, port = settings.temporal.address.rsplit(":", 1)
    assert host == "temporal" and int(port) in published(services["temporal"]).values()
    assert settings.temporal.namespace == "default"
    assert set(settings.providers) == {"kwok"}

    kubeconfig = settings.kubernetes.kubeconfig
    assert kubeconfig in files and not settings.kubernetes.in_cluster
    server = urlparse(yaml.safe_load(files[kubeconfig].read_text())["clusters"][0]["cluster"]["server"])
    assert server.hostname == "kwok" and server.port in published(services["kwok"]).values()

    assert settings.node_groups_file in files
    groups, problems = parse_node_groups_yaml(files[settings.node_groups_file].read_text(), settings.providers)
    assert problems == [] and groups

    # The healthcheck asks the worker's readiness probe; Prometheus reaches the published port.
    health_port = int(settings.observability.health_address.rsplit(":", 1)[1])
    assert f"127.0.0.1:{health_port}/readyz" in " ".join(worker["healthcheck"]["test"])
    metrics_host, metrics_port = settings.observability.metrics_address.rsplit(":", 1)
    assert metrics_host == "0.0.0.0" and int(metrics_port) in published(worker).values()

    starter = services["autoscaler"]
    assert starter["command"][:3] == ["growth", "nodes", "start"]
    assert services["autoscaler"]["depends_on"]["worker"]["condition"] == "service_healthy"
    assert mounts(starter)[env(starter)["GROWTH_CONFIG"]] == files[config_target]
    assert env(starter)["GROWTH_CLUSTER"] == env(worker)["GROWTH_CLUSTER"]


def test_dockerfile_installs_every_package_and_runs_the_worker() -> None:
    text = (ROOT / "Dockerfile").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]]
    copied = set(re.findall(r"^COPY (\S+)", text, re.M)) | {
        w for line in re.findall(r"^COPY (.+) \S+$", text, re.M) for w in line.split()
    }
    for pkg in packages:
        assert f"{pkg}/" in copied, f"Dockerfile copies {pkg}/"
    for module in project["tool"]["setuptools"]["py-modules"]:
        assert f"{module}.py" in copied
    assert "README.md" in copied and "pyproject.toml" in copied  # pyproject's readme must exist to build
    assert re.search(r'^CMD \["growth-worker"', text, re.M)
    assert "growth-worker" in project["project"]["scripts"] and "growth" in project["project"]["scripts"]
    assert re.search(r"^USER 10001$", text, re.M)


# -- manifests ------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", manifests(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_manifest_parses_and_names_its_objects(path: Path) -> None:
    objs = docs(path)
    assert objs, f"{path} holds at least one object"
    for obj in objs:
        assert obj.get("apiVersion") and obj.get("kind"), obj
        assert obj.get("metadata", {}).get("name"), obj


def test_crd_matches_the_code() -> None:
    (crd,) = [d for d in find("CustomResourceDefinition") if d["spec"]["group"] == CRD_GROUP]
    spec = crd["spec"]
    names = spec["names"]
    assert spec["group"] == CRD_GROUP
    assert names["plural"] == NODE_GROUP_PLURAL and names["kind"] == KIND
    assert crd["metadata"]["name"] == f"{names['plural']}.{spec['group']}"
    served = [v for v in spec["versions"] if v["served"]]
    assert [v["name"] for v in served] == [CRD_VERSION]
    assert [v["name"] for v in spec["versions"] if v["storage"]] == [CRD_VERSION]
    assert "status" in served[0]["subresources"]  # report_node_group_status patches /status
    assert spec["scope"] == "Cluster"  # activities list cluster-scoped custom objects


def test_example_node_groups_are_valid_and_keep_seed_004s_priorities() -> None:
    path = DEPLOY / "examples" / "nodegroups.yaml"
    for obj in docs(path):
        assert obj["apiVersion"] == f"{CRD_GROUP}/{CRD_VERSION}" and obj["kind"] == KIND
    groups, problems = parse_node_groups_yaml(path.read_text(), {"hetzner", "kwok"})
    assert problems == []
    by_name = {g.name: g for g in groups}
    assert {"general", "kwok"} <= set(by_name)
    tiers = [[p.name for p in tier] for tier in priority_tiers(flatten_pools(by_name["general"]))]
    assert tiers == [["hetzner-cax11"], ["hetzner-cx31", "hetzner-cx32"]]
    assert by_name["general"].headroom == Resources(cpu_m=2000, memory=4 * 2**30, pods=1)
    assert {p.provider for p in by_name["kwok"].pools} == {"kwok"}


def _allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r.get("apiGroups", [])
        and (resource in r.get("resources", []) or "*" in r.get("resources", []))
        and (verb in r.get("verbs", []) or "*" in r.get("verbs", []))
        for r in rules
    )


REQUIRED = [
    ("", "pods", ["get", "list"]),
    ("", "pods/eviction", ["create"]),
    ("", "nodes", ["get", "list", "patch", "delete", "create"]),
    ("", "events", ["create"]),
    ("policy", "poddisruptionbudgets", ["list"]),
    (CRD_GROUP, NODE_GROUP_PLURAL, ["get", "list"]),
    (CRD_GROUP, f"{NODE_GROUP_PLURAL}/status", ["patch"]),
    ("longhorn.io", "volumes", ["get", "list"]),
    ("longhorn.io", "replicas", ["get", "list"]),
    # the components loop's activities (activities/components/kube.py)
    ("pingcap.com", "tidbclusterautoscalers", ["get", "list", "update"]),
    ("pingcap.com", "tidbclusters", ["get", "list", "create", "patch", "delete"]),
    # the KWOK provider's capacity Lease (activities/kube/lease.py)
    ("coordination.k8s.io", "leases", ["get", "create", "update"]),
]


def test_rbac_grants_what_the_activities_use() -> None:
    (role,) = find("ClusterRole", DEPLOY / "base" / "rbac.yaml")
    for group, resource, verbs in REQUIRED:
        for verb in verbs:
            assert _allows(role["rules"], group, resource, verb), f"{verb} {resource} in group {group!r}"
    # Least privilege: nothing cluster-wide by wildcard, no secrets.
    for rule in role["rules"]:
        assert "*" not in rule["resources"] and "*" not in rule["verbs"] and "*" not in rule["apiGroups"]
        assert "secrets" not in rule["resources"]


def test_rbac_is_bound_to_the_workers_service_account() -> None:
    (binding,) = find("ClusterRoleBinding", DEPLOY / "base" / "rbac.yaml")
    (role,) = find("ClusterRole", DEPLOY / "base" / "rbac.yaml")
    (deploy,) = find("Deployment", DEPLOY / "base" / "worker.yaml")
    (sa,) = find("ServiceAccount", DEPLOY / "base" / "worker.yaml")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (subject,) = binding["subjects"]
    assert subject == {
        "kind": "ServiceAccount",
        "name": sa["metadata"]["name"],
        "namespace": sa["metadata"]["namespace"],
    }
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]
    assert deploy["metadata"]["namespace"] == sa["metadata"]["namespace"]
    namespaces = [n["metadata"]["name"] for n in find("Namespace", DEPLOY / "base" / "worker.yaml")]
    assert sa["metadata"]["namespace"] in namespaces


def test_worker_deployment_reads_its_configmap(tmp_path: Path) -> None:
    (deploy,) = find("Deployment", DEPLOY / "base" / "worker.yaml")
    (cm,) = find("ConfigMap", DEPLOY / "base" / "worker.yaml")
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    argv = container.get("command", []) + container.get("args", [])
    assert argv[0] == "growth-worker"
    config_path = Path(argv[argv.index("--config") + 1])
    volumes = {v["name"]: v for v in pod["volumes"]}
    mount_dirs = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    config_volume = mount_dirs[str(config_path.parent)]
    assert config_volume["configMap"]["name"] == cm["metadata"]["name"]
    assert config_path.name in cm["data"]

    # The ConfigMap's settings load as the worker loads them, in-cluster, hetzner settings valid.
    file = tmp_path / config_path.name
    file.write_text(cm["data"][config_path.name])
    settings = load_settings(str(file))
    assert settings.kubernetes.in_cluster
    for name, cfg in settings.providers.items():
        if name == "hetzner":
            HetznerSettings.model_validate(cfg)
            # Secret files it names are inside a mounted Secret volume.
            for key in [k for k in cfg if k.endswith("_file")]:
                d = str(Path(cfg[key]).parent)
                assert d in mount_dirs and "secret" in mount_dirs[d], f"{key} {cfg[key]} is on a Secret volume"
    # Secrets never in the ConfigMap: secret-like keys only name files or environment variables.
    assert _secret_keys(yaml.safe_load(cm["data"][config_path.name])) == []

    # Probes and metrics: the ports the settings bind, on every interface so the kubelet and
    # Prometheus reach them; liveness asks /healthz, readiness /readyz (connected and polling).
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    metrics_host, metrics_port = settings.observability.metrics_address.rsplit(":", 1)
    health_host, health_port = settings.observability.health_address.rsplit(":", 1)
    assert metrics_host == health_host == "0.0.0.0"
    assert ports == {"metrics": int(metrics_port), "probes": int(health_port)}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path and ports.get(get["port"], get["port"]) == int(health_port), probe
    annotations = deploy["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == metrics_port and annotations["prometheus.io/path"] == "/metrics"


def _secret_keys(obj: Any, path: str = "") -> list[str]:
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            here = f"{path}.{k}" if path else k
            if re.search(r"token|password|secret|api_key", k) and not k.endswith(("_file", "_env")):
                found.append(here)
            found += _secret_keys(v, here)
    return found


def test_example_settings_load() -> None:
    settings = load_settings(str(DEPLOY / "growth.example.yaml"))
    assert settings.temporal.task_queue == "growth"
    assert "kwok" in settings.providers


def test_recommender_tls_role_grants_one_secret_to_the_worker() -> None:
    # A tlsSecret is read with `get` on that Secret only; the ClusterRole stays secret-free.
    path = DEPLOY / "examples" / "recommender-tls-rbac.yaml"
    (role,) = find("Role", path)
    (binding,) = find("RoleBinding", path)
    (cluster_binding,) = find("ClusterRoleBinding", DEPLOY / "base" / "rbac.yaml")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["recommender-client"], "verbs": ["get"]}
    ]
    assert binding["subjects"] == cluster_binding["subjects"] and binding["roleRef"]["name"] == role["metadata"]["name"]
