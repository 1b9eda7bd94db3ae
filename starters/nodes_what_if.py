"""`growth nodes what-if`: replay a NodeAutoscaler's recorded observations through the current
planner under changed node groups and/or settings (scaling/nodes/what_if.py decides; this module
loads the history and the files, and prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml
from temporalio.client import Client

from activities.settings import Settings
from scaling.nodes.nodegroups import parse_node_groups_yaml
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.what_if import LoopOutcome, WhatIfReport, recorded_providers, what_if
from starters.cli import REFUSED, Call, CliError, shared_options
from starters.history import MAX_EVENTS, MAX_RUNS, history_from_file, history_from_temporal
from starters.settings_flags import flag_for, given, model_options, validated
from workflows.nodes.autoscaler import autoscaler_id

# The settings the planning step reads; the others (timeouts, scale-down) change nothing here.
PLANNING_FIELDS = ("max_nodes_total", "max_price_per_hour_total", "enforce_min_nodes", "max_requests_in_flight")
SKIPPED = frozenset(set(AutoscalerSettings.model_fields) - set(PLANNING_FIELDS))


def settings_changes(path: str | None, flags: dict[str, Any]) -> dict[str, Any]:
    """The settings file's planning fields, then the flags; errors name the field."""
    changes: dict[str, Any] = {}
    if path:
        try:
            loaded = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as err:
            raise CliError(f"--settings: cannot read {path}: {err}", REFUSED) from None
        if not isinstance(loaded, dict):
            raise CliError(f"--settings: {path} must hold a mapping of AutoscalerSettings fields", REFUSED)
        section = loaded.get("autoscaler", loaded)  # the worker's settings file, or the fields alone
        for name in section:
            if name not in AutoscalerSettings.model_fields:
                raise CliError(f"--settings: {name}: not an AutoscalerSettings field", REFUSED)
        changes.update({k: v for k, v in section.items() if k in PLANNING_FIELDS})
    changes.update(flags)
    checked = validated(  # as the loop would validate them (cluster: any name)
        AutoscalerSettings,
        {"cluster": "what-if", **changes},
        lambda name: flag_for(name) if name in flags else f"--settings {name}",
    )
    return {k: getattr(checked, k) for k in changes}


def _choices(o: LoopOutcome) -> str:
    if not o.nodes:
        return "-"
    return ", ".join(f"{c.count}x {c.provider}/{c.server_type}" for c in o.choices)


def _pending(o: LoopOutcome) -> str:
    return "?" if o.pods_pending is None else str(o.pods_pending)


def format_report(r: WhatIfReport) -> str:
    lines = [f"what-if over {r.workflow_id}: {r.runs} run(s), {len(r.loops)} loop(s) listed"]
    lines.append(
        f"{'loop':>4}  {'at (UTC)':<19}  {'unsched':>7}  {'happened':<30}  {'what-if':<30}  {'Δnodes':>6}  {'Δ/h':>8}"
    )
    for loop in r.loops:
        if not (loop.recorded.nodes or loop.what_if.nodes or loop.what_if.pods_pending):
            continue  # quiet loops: nothing started either way
        lines.append(
            f"{loop.loop:>4}  {loop.at:%Y-%m-%d %H:%M:%S}  {loop.unschedulable:>7}  {_choices(loop.recorded):<30}  "
            f"{_choices(loop.what_if):<30}  {loop.difference.nodes:>+6}  {loop.difference.cost_per_hour:>+8.4f}"
        )
        if loop.what_if.pods_pending:
            lines.append(f"{'':>4}  what-if leaves {loop.what_if.pods_pending} pod(s) pending")
    t, w = r.total_recorded, r.total_what_if
    lines.append(f"total happened: {t.nodes} node(s) [{_choices(t)}], {t.cost_per_hour:.4f}/h")
    lines.append(
        f"total what-if:  {w.nodes} node(s) [{_choices(w)}], {w.cost_per_hour:.4f}/h, "
        f"{_pending(w)} pod-loop(s) left pending"
    )
    d = r.difference
    by_type = ", ".join(f"{k} {v:+d}" for k, v in d.server_types.items()) or "same types"
    lines.append(f"difference:     {d.nodes:+d} node(s), {d.cost_per_hour:+.4f}/h ({by_type})")
    if r.truncated:
        lines.append(f"note: history {r.truncated}")
    lines.extend(f"note: {n}" for n in r.notes)
    return "\n".join(lines)


EXAMPLES = """\b
Examples:
  growth nodes --cluster prod what-if --node-groups cheaper.yaml
  growth nodes --cluster prod what-if --max-nodes-total 20 -o json
  growth nodes what-if --history nodes_NodeAutoscaler.json --settings planning.yaml
  growth nodes --cluster prod what-if consolidate
"""


# A group so that `what-if consolidate` (starters/nodes_consolidate.py) reads as the issue and
# Karpenter users say it; alone, `what-if` replays the recorded loops.
@click.group("what-if", epilog=EXAMPLES, invoke_without_command=True)
@click.option(
    "--history", "history_file", type=click.Path(dir_okay=False), help="a history JSON file instead of Temporal"
)
@click.option("--workflow-id", help="the NodeAutoscaler's workflow id (default: nodes/<cluster>)")
@click.option(
    "--node-groups",
    "groups_file",
    type=click.Path(dir_okay=False),
    help="a YAML stream of NodeGroupWithPriority objects replacing the recorded groups",
)
@click.option(
    "--settings", "settings_file", type=click.Path(dir_okay=False), help="a YAML of AutoscalerSettings fields"
)
@model_options(AutoscalerSettings, skip=SKIPPED)
@click.option(
    "--max-runs", type=click.IntRange(min=1), default=MAX_RUNS, show_default=True, help="runs read, newest first"
)
@click.option("--max-events", type=click.IntRange(min=1), default=MAX_EVENTS, show_default=True, help="events read")
@click.option(
    "--max-loops", type=click.IntRange(min=0), default=200, show_default=True, help="loops listed (totals cover all)"
)
@shared_options
@click.pass_context
def what_if_command(
    ctx: click.Context,
    history_file: str | None,
    workflow_id: str | None,
    groups_file: str | None,
    settings_file: str | None,
    max_runs: int,
    max_events: int,
    max_loops: int,
    **_: object,
) -> Call | None:
    """What the current planner would have started, loop by loop, under other node groups or settings.

    Reads the NodeAutoscaler's recorded observations (every run of its continue-as-new chain, or
    a history file) and prints, per loop and in total: nodes and types, cost per hour, pods left
    pending, and the difference from what the loop really started. `what-if consolidate`: what
    consolidation would do to the cluster now.
    """
    if ctx.invoked_subcommand is not None:
        return None  # the subcommand's Call is the group's result
    cluster: str = ctx.obj
    flags = given(ctx, list(PLANNING_FIELDS))

    def check(settings: Settings | None = None) -> None:
        settings_changes(settings_file, flags)

    async def run(client: Client | None, settings: Settings | None) -> WhatIfReport:
        changes = settings_changes(settings_file, flags)
        if history_file:
            history = history_from_file(history_file, max_events)
        else:
            assert client is not None
            history = await history_from_temporal(client, workflow_id or autoscaler_id(cluster), max_runs, max_events)
        groups = None
        if groups_file:
            try:
                text = Path(groups_file).read_text()
            except OSError as err:
                raise CliError(f"--node-groups: cannot read {groups_file}: {err.strerror}") from None
            providers = recorded_providers(history)
            if settings is not None:
                providers |= set(settings.providers)
            groups, problems = parse_node_groups_yaml(text, providers or {"kwok"})
            if problems:
                p = problems[0]
                raise CliError(f"--node-groups: {p.name or groups_file}: {p.field}: {p.message}", REFUSED)
        return what_if(history, groups, changes, max_loops_shown=max_loops)

    return Call(
        run=run,
        table=format_report,
        not_found=f"no NodeAutoscaler history {workflow_id or autoscaler_id(cluster)}",
        needs_client=not history_file,
        check=check,
    )
