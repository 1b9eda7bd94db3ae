"""Worker settings: where the cluster is, where node groups come from, provider settings.

Read from a YAML file (GROWTH_CONFIG or --config). Secrets are never in it: only paths of
files (or names of environment variables) that hold them, read by the activity that needs them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field


class KubeSettings(BaseModel):
    kubeconfig: str | None = None  # path; None + in_cluster=False means the default kubeconfig
    context: str | None = None
    in_cluster: bool = False


class TemporalSettings(BaseModel):
    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "growth"
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_ca_file: str | None = None
    api_key_env: str | None = None  # name of an environment variable holding a Temporal Cloud API key


class Settings(BaseModel):
    kubernetes: KubeSettings = Field(default_factory=KubeSettings)
    temporal: TemporalSettings = Field(default_factory=TemporalSettings)
    node_groups_file: str | None = None  # YAML of NodeGroupWithPriority documents; None = the CRs
    providers: dict[str, dict[str, Any]] = Field(default_factory=lambda: {"kwok": {}})


def _resolve(base: Path, value: str | None) -> str | None:
    if value is None or os.path.isabs(value):
        return value
    return str((base / value).resolve())


def load_settings(path: str | None = None) -> Settings:
    path = path or os.environ.get("GROWTH_CONFIG")
    if not path:
        return Settings()
    file = Path(path)
    raw = yaml.safe_load(file.read_text()) or {}
    settings = Settings.model_validate(raw)
    base = file.parent
    settings.kubernetes.kubeconfig = _resolve(base, settings.kubernetes.kubeconfig)
    settings.node_groups_file = _resolve(base, settings.node_groups_file)
    for cfg in settings.providers.values():
        for key in list(cfg):
            if key.endswith("_file") and isinstance(cfg[key], str):
                cfg[key] = _resolve(base, cfg[key])
    return settings
