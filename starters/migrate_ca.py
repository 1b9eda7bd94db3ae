"""`growth-migrate-ca`: turn Cluster Autoscaler's Hetzner settings into growth's.

    growth-migrate-ca --deployment cluster-autoscaler.yaml [--priority-configmap priorities.yaml]
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

import yaml

from scaling.nodes.migrate_ca import PRIORITY_CONFIGMAP, CaSettings, MigrationError, migrate


def _container(docs: list[Any]) -> dict[str, Any]:
    """The cluster-autoscaler container of the first Deployment that runs one."""
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "Deployment":
            continue
        containers = (((doc.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        for c in containers:
            words = [*(c.get("command") or []), *(c.get("args") or []), str(c.get("image", ""))]
            if any("cluster-autoscaler" in str(w) for w in words):
                return c
    raise MigrationError("--deployment", "no Deployment with a cluster-autoscaler container")


def settings_from(args: argparse.Namespace, notes: list[str]) -> CaSettings:
    ca = CaSettings()
    if args.deployment:
        container = _container(list(yaml.safe_load_all(Path(args.deployment).read_text())))
        ca.args = [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]
        for var in container.get("env") or []:
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
        cm = yaml.safe_load(Path(args.priority_configmap).read_text()) or {}
        name = (cm.get("metadata") or {}).get("name")
        if name != PRIORITY_CONFIGMAP:
            notes.append(f"the ConfigMap is named {name!r}; CA reads only {PRIORITY_CONFIGMAP}")
        priorities = (cm.get("data") or {}).get("priorities")
        if priorities is None:
            raise MigrationError("--priority-configmap", "the ConfigMap has no data.priorities")
        ca.priorities = str(priorities)
    return ca


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="growth-migrate-ca", description=__doc__.splitlines()[0])
    parser.add_argument("--deployment", help="CA's Deployment YAML (command, args and env of its container)")
    parser.add_argument("--priority-configmap", help=f"the {PRIORITY_CONFIGMAP} ConfigMap YAML")
    parser.add_argument("--cluster-config-file", help="the JSON HCLOUD_CLUSTER_CONFIG(_FILE) holds, decoded")
    parser.add_argument("--env-file", help="KEY=VALUE lines: CA's environment")
    parser.add_argument("--arg", action="append", default=[], help="a CA flag, e.g. --arg=--nodes=1:10:CPX31:FSN1:p1")
    parser.add_argument("--out", help="directory for node-groups.yaml and worker-settings.yaml (default: print)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
