"""`growth fleet trail CLUSTER`: one data-plane cluster's decision trail from Temporal
(scaling/fleet/trail.py builds it; this module fetches and prints)."""

from __future__ import annotations

import click
from temporalio.client import Client

from activities.settings import Settings
from scaling.fleet.contracts import autoscaler_workflow_id, cluster_workflow_id
from scaling.fleet.trail import MAX_ENTRIES, cluster_trail
from scaling.history import Trail
from starters.cli import Call, CliError, shared_options
from starters.history import format_trail, history_from_temporal, optional_history, trail_options


@click.command("trail")
@click.argument("cluster")
@trail_options(MAX_ENTRIES)
@shared_options
@click.pass_obj
def trail_command(where: tuple[str, str], cluster: str, max_runs: int, max_events: int, max_entries: int) -> Call:
    """One cluster's timeline: why it was created, its phases and capacity reports, the instances
    placed and released, deprovisioning, the re-check and its deletion, an operator's approval."""
    wf_id = autoscaler_workflow_id(*where)

    async def run(client: Client, settings: Settings) -> Trail:
        autoscaler = await history_from_temporal(client, wf_id, max_runs, max_events)
        own = await optional_history(client, cluster_workflow_id(cluster), max_events)
        trail = cluster_trail(cluster, autoscaler, own, max_entries)
        if not trail.entries:
            raise CliError(f"no trail of cluster {cluster} in {wf_id}'s history ({len(autoscaler.runs)} run(s) read)")
        return trail

    return Call(run=run, table=format_trail, not_found=f"no FleetAutoscaler history {wf_id}")
