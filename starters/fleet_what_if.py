"""`growth fleet what-if`: replay a FleetAutoscaler's recorded rounds under another fleet
configuration (scaling/fleet/what_if.py decides; this module loads and prints)."""

from __future__ import annotations

import click
from temporalio.client import Client

from activities.settings import Settings
from scaling.fleet.config import FleetConfig, FleetConfigError, load_fleet_config
from scaling.fleet.contracts import autoscaler_workflow_id
from scaling.fleet.what_if import FleetDecisions, FleetWhatIfReport, fleet_what_if
from starters.cli import REFUSED, Call, CliError, shared_options
from starters.history import MAX_EVENTS, MAX_RUNS, history_from_file, history_from_temporal


def _config(path: str | None) -> FleetConfig | None:
    if not path:
        return None
    try:
        return load_fleet_config(path)
    except FleetConfigError as err:
        raise CliError(f"--fleet-config: {path}: {err}", REFUSED) from None
    except OSError as err:
        raise CliError(f"--fleet-config: {err}", REFUSED) from None


def _decisions(d: FleetDecisions) -> str:
    ups = ", ".join(f"+{n} {t}" for t, n in sorted(d.scale_up.items()))
    downs = ", ".join(f"-{c}" for c in d.removals)
    return "; ".join(x for x in (ups, downs) if x) or "-"


def format_report(r: FleetWhatIfReport) -> str:
    lines = [f"what-if over {r.workflow_id}: {r.runs} run(s), {r.rounds_replayed} recorded evaluation(s) replayed"]
    lines.append(f"{'round':>5}  {'at (UTC)':<19}  {'units used/max':<18}  {'happened':<28}  what-if")
    for x in r.rounds:
        units = ", ".join(f"{t} {u}" for t, u in x.units.items()) or "-"
        lines.append(
            f"{x.round:>5}  {x.at:%Y-%m-%d %H:%M:%S}  {units:<18}  {_decisions(x.happened):<28}  "
            f"{_decisions(x.what_if)}"
        )
    lines.append(f"total happened: {_decisions(r.total_happened)}")
    lines.append(f"total what-if:  {_decisions(r.total_what_if)} (decisions: a wanted cluster counts every round)")
    diff = ", ".join(f"{t} {n:+d}" for t, n in r.difference.items() if n) or "none"
    lines.append(f"difference in clusters started: {diff}")
    if r.truncated:
        lines.append(f"note: history {r.truncated}")
    lines.extend(f"note: {n}" for n in r.notes)
    return "\n".join(lines)


EXAMPLES = """\b
Examples:
  growth fleet --region us-east-1 what-if --fleet-config more-slack.yaml
  growth fleet what-if --history region.json --fleet-config fleet.yaml -o json
"""


@click.command("what-if", epilog=EXAMPLES)
@click.option(
    "--history", "history_file", type=click.Path(dir_okay=False), help="a history JSON file instead of Temporal"
)
@click.option("--workflow-id", help="the FleetAutoscaler's workflow id (default: fleet/<provider>/<region>)")
@click.option("--fleet-config", type=click.Path(dir_okay=False), help="the fleet configuration to evaluate with")
@click.option(
    "--max-runs", type=click.IntRange(min=1), default=MAX_RUNS, show_default=True, help="runs read, newest first"
)
@click.option("--max-events", type=click.IntRange(min=1), default=MAX_EVENTS, show_default=True, help="events read")
@click.option("--max-rounds", type=click.IntRange(min=0), default=200, show_default=True, help="rounds listed")
@shared_options
@click.pass_obj
def what_if_command(
    where: tuple[str, str],
    history_file: str | None,
    workflow_id: str | None,
    fleet_config: str | None,
    max_runs: int,
    max_events: int,
    max_rounds: int,
) -> Call:
    """What the region's loop would have decided, round by round, under another fleet configuration
    (capacity rules, limits, scale-up/down switches), beside what it did."""
    wf_id = workflow_id or autoscaler_workflow_id(*where)

    async def run(client: Client | None, settings: Settings | None) -> FleetWhatIfReport:
        config = _config(fleet_config)
        if history_file:
            history = history_from_file(history_file, max_events)
        else:
            assert client is not None
            history = await history_from_temporal(client, wf_id, max_runs, max_events)
        return fleet_what_if(history, config, max_rounds_shown=max_rounds)

    return Call(
        run=run,
        table=format_report,
        not_found=f"no FleetAutoscaler history {wf_id}",
        needs_client=not history_file,
        check=lambda settings: _config(fleet_config),
    )
