"""`growth nodes what-if consolidate`: what consolidation would do to the cluster now and save
(scaling/nodes/disruption/what_if.py decides; this module reads the cluster and the catalogue the
worker's settings name, and prints)."""

from __future__ import annotations

import asyncio
import time

import click
from temporalio.client import Client

from activities.kube.client import ClusterClients
from activities.nodes import build_providers
from activities.nodes.scale_down import ScaleDownActivities
from activities.settings import Settings
from scaling.nodes.disruption.what_if import ConsolidationReport, consolidation_now
from starters.cli import Call, shared_options

EXAMPLES = """\b
Examples:
  growth nodes --cluster prod what-if consolidate
  growth nodes what-if consolidate -o json
"""


def format_consolidation(r: ConsolidationReport) -> str:
    lines = [f"{'node':<40}  {'kind':<12}  {'type':<8}  {'€/h now':>8}  {'successors':<24}  {'€/h after':>9}"]
    for s in r.steps:
        now = "?" if s.price_before is None else f"{s.price_before:.4f}"
        node = "+".join(s.nodes) if s.nodes else s.node  # a multi-node consolidation names every node
        lines.append(
            f"{node:<40}  {s.kind:<12}  {s.server_type:<8}  {now:>8}  {', '.join(s.successors) or '-':<24}  {s.price_after:>9.4f}"
        )
        if s.drain_order:  # the scheduler places its pods in this order only: evicted one at a time
            lines.append(f"  evicted one at a time, in this order: {', '.join(s.drain_order)}")
    saved = r.price_per_hour_before - r.price_per_hour_after
    lines.append(
        f"growth nodes now {r.price_per_hour_before:.4f}/h, after {r.price_per_hour_after:.4f}/h: {saved:.4f}/h saved"
    )
    if r.not_worth_it:
        lines.append(f"kept, a replacement would save under 10 %: {', '.join(r.not_worth_it)}")
    if r.unpriced:
        lines.append(f"not priced by the catalogue: {', '.join(r.unpriced)}")
    return "\n".join(lines)


@click.command("consolidate", epilog=EXAMPLES)
@shared_options
@click.pass_obj
def consolidate_command(cluster: str) -> Call:
    """What consolidation would remove or replace now, and the price per hour before and after.

    As if every group wrote consolidationPolicy: WhenEmptyOrUnderutilized and every unneeded timer
    had run out; budgets, PDBs, do-not-disrupt, Longhorn, minNodes, headroom and billing holds apply.
    A multi-node consolidation (several nodes to one cheaper successor, or to none) shows as one row
    naming its nodes, a+b+c."""

    async def run(client: Client, settings: Settings) -> ConsolidationReport:
        clusters = ClusterClients(settings)
        providers = build_providers(settings, clusters)
        down = ScaleDownActivities(
            clusters, known_providers=providers.keys(), node_groups_file=settings.node_groups_file, providers=providers
        )
        try:
            obs = await asyncio.to_thread(down.observe_scale_down, cluster)
            used = {p.provider for g in obs.groups for p in g.pools}
            catalogue = [t for name in sorted(used) if name in providers for t in await providers[name].server_types()]
        finally:
            clusters.close()  # the observation's informers: one read, not a watch for the process's life
        return consolidation_now(obs, catalogue, time.time())

    return Call(run=run, table=format_consolidation)
