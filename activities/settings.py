"""Worker settings, shared by the worker and `growth`: where each cluster is, where node
groups come from, provider settings, the Temporal connection, the metrics and probe endpoints, and
defaults for the NodeAutoscaler the CLI starts.

Sources, lowest to highest precedence: defaults, the YAML file (--config or GROWTH_CONFIG), then
environment variables named GROWTH_<FIELD>, nested with `__`:
GROWTH_TEMPORAL__ADDRESS=host:7233, GROWTH_CLUSTERS__PROD__KUBECONFIG=/etc/prod.kubeconfig.
Secrets are never in it: only paths of files (or names of environment variables) that hold them,
read by the activity that needs them.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as EnvParseError

from activities.components.settings import ComponentsSettings
from activities.fleet.settings import FleetSettings

ENV_PREFIX = "GROWTH_"


class KubeSettings(BaseModel):
    """How to reach one cluster's API server."""

    model_config = ConfigDict(extra="forbid")

    kubeconfig: str | None = None  # path; None + in_cluster=False means the default kubeconfig
    context: str | None = None
    in_cluster: bool = False


class TemporalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "growth"
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_ca_file: str | None = None
    api_key_env: str | None = None  # name of an environment variable holding a Temporal Cloud API key


class ObservabilitySettings(BaseModel):
    """host:port of the worker's endpoints; "" or "0" turns one off."""

    model_config = ConfigDict(extra="forbid")

    # Prometheus /metrics, served by the Temporal SDK's runtime: growth_* and the SDK's temporal_*.
    metrics_address: str = "127.0.0.1:9464"
    # /healthz (process up) and /readyz (connected to Temporal and polling).
    health_address: str = "127.0.0.1:9465"


def enabled_address(value: str | None) -> str | None:
    """The address to bind, or None when the setting turns the endpoint off."""
    return None if value in (None, "", "0") else value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid")

    # The default cluster: when `clusters` is empty, it serves every cluster name (one cluster
    # per worker, as before `clusters` existed).
    kubernetes: KubeSettings = Field(default_factory=KubeSettings)
    # One worker, many clusters: name -> how to reach it. When set, only these names are served.
    clusters: dict[str, KubeSettings] = Field(default_factory=dict)
    temporal: TemporalSettings = Field(default_factory=TemporalSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    node_groups_file: str | None = None  # YAML of NodeGroupWithPriority documents; None = the CRs
    providers: dict[str, dict[str, Any]] = Field(default_factory=lambda: {"kwok": {}})
    # Defaults for `growth nodes start` (AutoscalerSettings fields; flags override them).
    autoscaler: dict[str, Any] = Field(default_factory=dict)
    # The components loop: where each TiDB cluster's Prometheus and PD are.
    components: ComponentsSettings = Field(default_factory=ComponentsSettings)
    # The fleet loop (OCM, the agent API); None = this worker runs no fleet activities or agent API.
    fleet: FleetSettings | None = None

    def kube_for(self, cluster: str) -> KubeSettings | None:
        """How to reach `cluster`, or None when this worker does not serve it."""
        if not self.clusters:
            return self.kubernetes
        return self.clusters.get(cluster)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment overrides the file, as an operator expects from a Deployment's env.
        return (init_settings, env_settings, _FileSource(settings_cls))


class SettingsError(ValueError):
    """Settings that cannot be used; the message names the field and where it came from."""


# The YAML of the file being loaded, for _FileSource (a settings source has no arguments of its own).
_file_data: ContextVar[dict[str, Any] | None] = ContextVar("growth_settings_file", default=None)


class _FileSource(PydanticBaseSettingsSource):
    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # unused: __call__ is enough
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_file_data.get() or {})


def _resolve(base: Path, value: str | None) -> str | None:
    if value is None or os.path.isabs(value):
        return value
    return str((base / value).resolve())


def _describe(err: ValidationError, origin: str) -> str:
    parts = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(top level)"
        parts.append(f"{field}: {e['msg']}")
    return f"{origin}: " + "; ".join(parts)


def load_settings(path: str | None = None) -> Settings:
    """Defaults < the YAML file (path or $GROWTH_CONFIG) < GROWTH_* environment variables.

    Relative paths in the file resolve against the file's folder. Raises SettingsError naming
    the offending field."""
    path = path or os.environ.get("GROWTH_CONFIG")
    raw: dict[str, Any] = {}
    base = Path.cwd()
    origin = "settings (environment)"
    if path:
        file = Path(path)
        origin = f"settings {path} (or environment)"
        try:
            loaded = yaml.safe_load(file.read_text()) or {}
        except OSError as err:
            raise SettingsError(f"settings {path}: {err.strerror or err}") from None
        except yaml.YAMLError as err:
            raise SettingsError(f"settings {path}: not YAML: {err}") from None
        if not isinstance(loaded, dict):
            raise SettingsError(f"settings {path}: expected a mapping at the top, got {type(loaded).__name__}")
        raw = loaded
        base = file.parent
    token = _file_data.set(raw)
    try:
        settings = Settings()
    except ValidationError as err:
        raise SettingsError(_describe(err, origin)) from None
    except EnvParseError as err:  # a GROWTH_* variable that is not valid JSON where a section is expected
        raise SettingsError(f"{origin}: {err}") from None
    finally:
        _file_data.reset(token)
    for kube in (settings.kubernetes, *settings.clusters.values()):
        kube.kubeconfig = _resolve(base, kube.kubeconfig)
    settings.node_groups_file = _resolve(base, settings.node_groups_file)
    for cfg in settings.providers.values():
        for key in list(cfg):
            if key.endswith("_file") and isinstance(cfg[key], str):
                cfg[key] = _resolve(base, cfg[key])
    return settings
