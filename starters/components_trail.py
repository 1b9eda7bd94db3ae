"""`growth components -n NS NAME trail`: a ComponentAutoscaler's changes and their reasons from
its Temporal history (scaling/components/trail.py builds it; this module fetches and prints)."""

from __future__ import annotations

import click
from temporalio.client import Client

from activities.settings import Settings
from scaling.components.trail import MAX_ENTRIES, component_trail
from scaling.history import Trail
from starters.cli import Call, CliError, shared_options
from starters.history import format_trail, history_from_temporal, trail_options
from workflows.components.autoscaler import workflow_id


@click.command("trail")
@click.option("--component", default="", help="only this component's changes (tidb, tikv, ...)")
@trail_options(MAX_ENTRIES, events="events read")
@shared_options
@click.pass_obj
def trail_command(where: tuple[str, str], component: str, max_runs: int, max_events: int, max_entries: int) -> Call:
    """Every change the loop made (replicas, heterogeneous groups) with its reason, its warnings,
    and the operator's overrides, across continue-as-new runs."""
    wf_id = workflow_id(*where)

    async def run(client: Client, settings: Settings) -> Trail:
        history = await history_from_temporal(client, wf_id, max_runs, max_events)
        trail = component_trail(history, component, max_entries)
        if not trail.entries:
            raise CliError(f"no changes in {wf_id}'s history ({len(history.runs)} run(s) read)")
        return trail

    return Call(run=run, table=format_trail, not_found=f"no ComponentAutoscaler history {wf_id}")
