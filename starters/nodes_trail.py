"""`growth nodes trail NODE`: one node's decision trail from Temporal (scaling/nodes/trail.py
builds it; this module finds and fetches the histories and prints)."""

from __future__ import annotations

import click
from temporalio.client import Client

from activities.settings import Settings
from scaling.history import RecordedHistory, Trail
from scaling.nodes.disruption.orchestration import replacement_id
from scaling.nodes.scale_up.requests import split_request_id
from scaling.nodes.trail import MAX_ENTRIES, node_trail, request_of_node
from starters.cli import Call, CliError, shared_options
from starters.history import (
    executions_of,
    format_trail,
    history_from_temporal,
    optional_history,
    trail_options,
)
from workflows.nodes.autoscaler import autoscaler_id
from workflows.nodes.scale_down import scale_down_id

MAX_REMOVALS_READ = 5  # NodeScaleDown executions of one node (cancelled ones, then the removal)


def _merged(histories: list[RecordedHistory]) -> RecordedHistory | None:
    if not histories:
        return None
    events = sorted((e for h in histories for e in h.events), key=lambda e: e.at)
    runs = [r for h in histories for r in h.runs]
    return RecordedHistory(workflow_id=histories[0].workflow_id, events=events, runs=runs)


EXAMPLES = """\b
Examples:
  growth nodes --cluster prod trail prod-hetzner-cx22-1a2b3c4d
  growth nodes trail demo-kwok-cx32-02eb31f8 -o json
"""


@click.command("trail", epilog=EXAMPLES)
@click.argument("node")
@trail_options(MAX_ENTRIES)
@shared_options
@click.pass_obj
def trail_command(cluster: str, node: str, max_runs: int, max_events: int, max_entries: int) -> Call:
    """One node's timeline: the pods that asked for it, the plan, each attempt, Ready, each
    scale-down evaluation that kept it and why, and its removal (who, when, which pods moved)."""

    async def run(client: Client, settings: Settings) -> Trail:
        autoscaler = await history_from_temporal(client, autoscaler_id(cluster), max_runs, max_events)
        request_id = request_of_node(autoscaler, node)
        # A batch member's history is its batch's (`<batch id>#<index>`).
        request_wf = split_request_id(request_id)[0]
        request = await optional_history(client, request_wf, max_events) if request_id else None
        removals = []
        for wf in (replacement_id(cluster, node), scale_down_id(cluster, node)):  # a replacement drains by its removal
            for run_id in await executions_of(client, wf, MAX_REMOVALS_READ):
                found = await optional_history(client, wf, max_events, run_id)
                if found is not None:
                    removals.append(found)
        trail = node_trail(node, autoscaler, request, _merged(removals), max_entries)
        if not trail.entries:
            raise CliError(
                f"no trail of node {node} in {autoscaler_id(cluster)}'s history ({len(autoscaler.runs)} run(s) read)"
            )
        if request_id and request is None:
            trail.notes.append(f"{request_id}: no history left (past retention): attempts as the loop heard them")
        return trail

    hint = f"no NodeAutoscaler {autoscaler_id(cluster)} history"
    return Call(run=run, table=format_trail, not_found=hint)
