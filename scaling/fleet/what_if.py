"""What-if over a FleetAutoscaler's recorded evaluations (`growth fleet what-if`): each evaluation
the region recorded (what it read and decided, scaling.fleet.decisions) is decided again by
today's rules, under another fleet configuration when one is given.

A changed configuration brings its limits, slack and dynamic scaling switches. The figures that
depend on the instance sizes (which clusters hold the biggest size, the capacity a cluster counts
with before its agent reports) are as recorded. Rounds are not chained through the
counterfactual: a cluster only the what-if would start does not appear in later rounds, so a type
the what-if wants is counted in every recorded evaluation until the region's figures change (the
totals count decisions, not clusters). A round the region decided without evaluating again (its
figures unchanged) is not in the history: its recorded outcome stood. Runs started before release
0.2.0 decided in workflow code and recorded no evaluation: there is nothing to replay.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from pydantic import BaseModel, Field

from scaling.fleet import contracts
from scaling.fleet.capacity import CapacityTally, TypeRules, type_rules
from scaling.fleet.config import FleetConfig
from scaling.fleet.evaluation import RegionEvaluation, RegionFigures, TypeFigures, evaluate
from scaling.fleet.region import FleetAutoscalerInput
from scaling.history import RecordedHistory, first_input


class FleetDecisions(BaseModel):
    scale_up: dict[str, int] = Field(default_factory=dict)  # instance type -> clusters started
    removals: list[str] = Field(default_factory=list)  # clusters marked deprovisioning

    @property
    def count(self) -> int:
        return sum(self.scale_up.values()) + len(self.removals)


class RecordedEvaluation(BaseModel):
    run_id: str
    at: datetime
    provider: str
    region: str
    figures: RegionFigures  # what it read
    evaluation: RegionEvaluation  # what it decided


class FleetWhatIfRound(BaseModel):
    round: int
    run_id: str
    at: datetime
    units: dict[str, str] = Field(default_factory=dict)  # type -> "consumed/capacity" as recorded
    happened: FleetDecisions
    what_if: FleetDecisions


class FleetWhatIfReport(BaseModel):
    workflow_id: str
    runs: int
    rounds: list[FleetWhatIfRound] = Field(default_factory=list)  # those where either side acted
    rounds_replayed: int = 0
    total_happened: FleetDecisions = Field(default_factory=FleetDecisions)
    total_what_if: FleetDecisions = Field(default_factory=FleetDecisions)
    difference: dict[str, int] = Field(default_factory=dict)  # type -> what-if minus happened scale-ups
    truncated: str = ""
    notes: list[str] = Field(default_factory=list)


def recorded_evaluations(history: RecordedHistory) -> list[RecordedEvaluation]:
    """Every evaluation the history recorded, in order, with its region."""
    out: list[RecordedEvaluation] = []
    region = ("", "")
    for e in history.events:
        if e.kind == "started":
            inp = FleetAutoscalerInput.model_validate(first_input(e))
            region = (inp.settings.provider, inp.settings.region)
        elif e.kind == "local_activity" and e.name == contracts.EVALUATE_REGION and e.result is not None:
            out.append(
                RecordedEvaluation(
                    run_id=e.run_id,
                    at=e.at,
                    provider=region[0],
                    region=region[1],
                    figures=RegionFigures.model_validate(first_input(e)),
                    evaluation=RegionEvaluation.model_validate(e.result),
                )
            )
    return out


def under(figures: RegionFigures, rules: dict[str, TypeRules], config: FleetConfig) -> RegionFigures:
    """The recorded figures under another configuration's rules (module doc: what it changes)."""
    recorded = {t.rules.instance_type: t for t in figures.types}
    types = []
    for itype in sorted(rules):
        t = recorded.get(itype)
        if t is None:  # a type the region did not offer: no cluster ran it
            types.append(TypeFigures(rules=rules[itype], tally=CapacityTally(), ready=CapacityTally()))
            continue
        new = t.rules.model_copy(update={"limit": rules[itype].limit, "slack": rules[itype].slack})
        types.append(t.model_copy(update={"rules": new}))
    scaling = config.dynamic_scaling
    return RegionFigures(
        types=types,
        scale_up_enabled=scaling.enable_dynamic_data_plane_scale_up,
        scale_down_enabled=scaling.enable_dynamic_data_plane_scale_down,
    )


def _decisions(ev: RegionEvaluation) -> FleetDecisions:
    return FleetDecisions(scale_up=dict(Counter(ev.scale_up_types())), removals=ev.removals())


def _units(figures: RegionFigures) -> dict[str, str]:
    return {t.rules.instance_type: f"{t.tally.consumed_units}/{t.tally.total_units}" for t in figures.types}


def _add(total: FleetDecisions, d: FleetDecisions) -> None:
    for k, v in d.scale_up.items():
        total.scale_up[k] = total.scale_up.get(k, 0) + v
    total.removals.extend(d.removals)


def fleet_what_if(
    history: RecordedHistory, config: FleetConfig | None = None, max_rounds_shown: int = 200
) -> FleetWhatIfReport:
    """Every recorded evaluation decided again by today's rules under `config` (None: the
    recorded rules), beside what the region decided (module doc)."""
    recorded = recorded_evaluations(history)
    report = FleetWhatIfReport(workflow_id=history.workflow_id, runs=len(history.runs), truncated=history.truncated)
    if not recorded:
        report.notes.append(
            "no recorded evaluation in the history (a run started before release 0.2.0 decided in workflow code)"
        )
        return report
    first = recorded[0]
    rules = type_rules(config, first.provider, first.region) if config is not None else None
    for n, r in enumerate(recorded, start=1):
        figures = r.figures
        if config is not None and rules is not None:
            figures = under(figures, rules, config)
        mine = _decisions(evaluate(figures))
        happened = _decisions(r.evaluation)
        _add(report.total_happened, happened)
        _add(report.total_what_if, mine)
        if (happened.count or mine.count) and len(report.rounds) < max_rounds_shown:
            report.rounds.append(
                FleetWhatIfRound(
                    round=n,
                    run_id=r.run_id,
                    at=r.at,
                    units=_units(r.figures),
                    happened=happened,
                    what_if=mine,
                )
            )
    report.rounds_replayed = len(recorded)
    types = set(report.total_happened.scale_up) | set(report.total_what_if.scale_up)
    report.difference = {
        t: report.total_what_if.scale_up.get(t, 0) - report.total_happened.scale_up.get(t, 0) for t in sorted(types)
    }
    if config is not None and not rules:
        report.notes.append(f"the new configuration has no region {first.provider}/{first.region}")
    return report
