"""`growth nodes migrate-from-ca` (alias `growth-migrate-ca`): turn Cluster Autoscaler's Hetzner settings into growth's.

    growth nodes migrate-from-ca --deployment cluster-autoscaler.yaml [--priority-configmap priorities.yaml]
                      [--cluster-config-file config.json] [--env-file ca.env] [--arg --nodes=1:10:CPX31:FSN1:pool1]
                      [--out DIR]

Reads CA's Deployment (its container's command, args and env), or flags and KEY=VALUE lines
given directly, and writes NodeGroupWithPriority objects (node-groups.yaml) and the worker's
settings (worker-settings.yaml) into DIR, or prints both; what could not be carried over is
listed on stderr. Secrets are never read from a Secret nor written: a value from a
secretKeyRef stays a reference. The logic is scaling.nodes.migrate_ca; this is the thin shell.
Exit codes: 0 written, 2 refused (the message names the setting).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import click
import yaml

from scaling.nodes.migrate_ca import PRIORITY_CONFIGMAP, CaSettings, MigrationError, migrate

EXAMPLE = """\b
Example:
  growth nodes migrate-from-ca --deployment cluster-autoscaler.yaml \\
      --priority-configmap priorities.yaml --out migrated/
"""


def _container(docs: list[Any]) -> dict[str, Any]:
    """The cluster-autoscaler container of the first Deployment that runs one."""
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "Deployment":
            continue
        containers = (((doc.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        for c in containers if isinstance(containers, list) else []:
            if not isinstance(c, dict):
                continue
            words = [*(c.get("command") or []), *(c.get("args") or []), str(c.get("image", ""))]
            if any("cluster-autoscaler" in str(w) for w in words):
                return c
    raise MigrationError("--deployment", "no Deployment with a cluster-autoscaler container")


def _yaml_docs(path: str, option: str) -> list[Any]:
    try:
        return list(yaml.safe_load_all(Path(path).read_text()))
    except yaml.YAMLError as e:
        raise MigrationError(option, f"not YAML: {e}") from None


def settings_from(args: argparse.Namespace, notes: list[str]) -> CaSettings:
    ca = CaSettings()
    if args.deployment:
        container = _container(_yaml_docs(args.deployment, "--deployment"))
        ca.args = [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]
        for var in container.get("env") or []:
            if not isinstance(var, dict):
                raise MigrationError("--deployment", f"an env entry must be a mapping, got {var!r}")
            name = str(var.get("name", ""))
            ref = (var.get("valueFrom") or {}).get("secretKeyRef")
            if ref is not None:
                ca.env_from_secrets[name] = f"secret {ref.get('name')}, key {ref.get('key')}"
            elif "value" in var:
                ca.env[name] = str(var["value"])
            else:
                notes.append(f"env {name} comes from {sorted(var.get('valueFrom') or {})}: not read")
        for source in container.get("envFrom") or []:
            notes.append(f"envFrom {source}: its variables were not read; pass them with --env-file")
    for line in Path(args.env_file).read_text().splitlines() if args.env_file else []:
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            ca.env[key.strip().removeprefix("export ").strip()] = value.strip().strip('"')
    ca.args += args.arg
    if args.cluster_config_file:
        ca.cluster_config_file = Path(args.cluster_config_file).read_text()
    if args.priority_configmap:
        cm = (_yaml_docs(args.priority_configmap, "--priority-configmap") or [{}])[0] or {}
        if not isinstance(cm, dict) or not isinstance(cm.get("metadata") or {}, dict):
            raise MigrationError("--priority-configmap", "not a ConfigMap")
        if not isinstance(cm.get("data") or {}, dict):
            raise MigrationError("--priority-configmap", "data must be a mapping")
        name = (cm.get("metadata") or {}).get("name")
        if name != PRIORITY_CONFIGMAP:
            notes.append(f"the ConfigMap is named {name!r}; CA reads only {PRIORITY_CONFIGMAP}")
        priorities = (cm.get("data") or {}).get("priorities")
        if priorities is None:
            raise MigrationError("--priority-configmap", "the ConfigMap has no data.priorities")
        ca.priorities = str(priorities)
    return ca


@click.command("migrate-from-ca", epilog=EXAMPLE)
@click.option("--deployment", help="CA's Deployment YAML (command, args and env of its container)")
@click.option("--priority-configmap", help=f"the {PRIORITY_CONFIGMAP} ConfigMap YAML")
@click.option("--cluster-config-file", help="the JSON HCLOUD_CLUSTER_CONFIG(_FILE) holds, decoded")
@click.option("--env-file", help="KEY=VALUE lines: CA's environment")
@click.option("--arg", multiple=True, help="a CA flag, e.g. --arg=--nodes=1:10:CPX31:FSN1:p1 (repeatable)")
@click.option("--out", help="directory for node-groups.yaml and worker-settings.yaml (default: print)")
def migrate_from_ca(**options: Any) -> int:
    """Turn Cluster Autoscaler's Hetzner settings into node groups and worker settings."""
    args = argparse.Namespace(**{**options, "arg": list(options["arg"])})
    notes: list[str] = []
    try:
        result = migrate(settings_from(args, notes))
    except MigrationError as e:
        print(f"growth-migrate-ca: refused: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"growth-migrate-ca: {e}", file=sys.stderr)
        return 2
    groups = yaml.safe_dump_all(result.node_groups, sort_keys=False)
    settings = yaml.safe_dump(result.worker_settings, sort_keys=False)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "node-groups.yaml").write_text(groups)
        (out / "worker-settings.yaml").write_text(settings)
        print(f"wrote {out / 'node-groups.yaml'} ({len(result.node_groups)} groups) and {out / 'worker-settings.yaml'}")
    else:
        print(f"# node groups\n{groups}---\n# worker settings\n{settings}", end="")
    for note in [*notes, *result.notes]:
        print(f"not carried over / changed: {note}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`growth-migrate-ca` and `growth nodes migrate-from-ca` (no Temporal connection needed)."""
    try:
        return migrate_from_ca.main(argv, prog_name="growth-migrate-ca", standalone_mode=False)
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.ClickException as err:
        err.show()
        return 2


if __name__ == "__main__":
    sys.exit(main())
