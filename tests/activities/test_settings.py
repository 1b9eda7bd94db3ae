"""Worker settings: a YAML file, overridden by GROWTH_* environment variables (nested with `__`);
errors name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from activities.settings import SettingsError, enabled_address, load_settings


def write(tmp_path: Path, data: object) -> str:
    path = tmp_path / "growth.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_environment_overrides_the_file_field_by_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(
        tmp_path,
        {
            "temporal": {"address": "file:7233", "task_queue": "from-file"},
            "clusters": {"east": {"kubeconfig": "east.kubeconfig", "context": "e"}},
        },
    )
    monkeypatch.setenv("GROWTH_TEMPORAL__ADDRESS", "env:7233")
    monkeypatch.setenv("GROWTH_CLUSTERS__EAST__CONTEXT", "from-env")
    monkeypatch.setenv("GROWTH_CLUSTERS__WEST__IN_CLUSTER", "true")
    monkeypatch.setenv("GROWTH_OBSERVABILITY__METRICS_ADDRESS", "0")
    # Variables that are not settings (the CLI's and the logger's) are left alone.
    monkeypatch.setenv("GROWTH_CLUSTER", "east")
    monkeypatch.setenv("GROWTH_LOG_LEVEL", "DEBUG")
    s = load_settings(path)
    assert s.temporal.address == "env:7233" and s.temporal.task_queue == "from-file"
    assert s.clusters["east"].context == "from-env"
    assert s.clusters["east"].kubeconfig == str(tmp_path / "east.kubeconfig")  # relative to the file
    assert s.clusters["west"].in_cluster is True
    assert enabled_address(s.observability.metrics_address) is None
    assert enabled_address(s.observability.health_address) == "127.0.0.1:9465"
    assert s.kube_for("east") is s.clusters["east"] and s.kube_for("north") is None


def test_config_path_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROWTH_CONFIG", write(tmp_path, {"temporal": {"namespace": "prod"}}))
    s = load_settings()
    assert s.temporal.namespace == "prod"
    assert s.kube_for("any-name") is s.kubernetes  # no clusters map: one cluster serves every name


@pytest.mark.parametrize(
    ("data", "env", "field"),
    [
        ({"temporal": {"adress": "x"}}, {}, "temporal.adress"),
        ({"clusters": {"east": {"in_cluster": "maybe"}}}, {}, "clusters.east.in_cluster"),
        ({}, {"GROWTH_CLUSTERS__EAST__IN_CLUSTER": "maybe"}, "clusters.east.in_cluster"),
        ({"kubernets": {}}, {}, "kubernets"),
    ],
)
def test_errors_name_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: dict, env: dict[str, str], field: str
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    path = write(tmp_path, data)
    with pytest.raises(SettingsError) as err:
        load_settings(path)
    assert field in str(err.value) and path in str(err.value)


def test_unreadable_or_non_mapping_file_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="missing.yaml"):
        load_settings(str(tmp_path / "missing.yaml"))
    with pytest.raises(SettingsError, match="mapping"):
        load_settings(write(tmp_path, ["a", "list"]))
