"""`make chaos` fails when a scenario does (bench/chaos.py failed_scenarios, main's exit status),
and --scenarios takes keys or patterns and refuses a name that matches nothing."""

from __future__ import annotations

import argparse
import asyncio
import json
from types import SimpleNamespace

import pytest

from bench import chaos
from bench.chaos_harness import FaultRecord, Outcome


def outcome(name: str, violations: list[str] | None = None, *faults: FaultRecord) -> Outcome:
    return Outcome(scenario=name, faults=list(faults), violations=violations or [], nodes_created=2, seconds=1.0)


def test_a_violation_or_an_unjudged_fault_fails_the_run_and_a_clean_one_does_not() -> None:
    clean = outcome("node-replacement/fault-free")
    recovered = outcome("node-replacement/kill-worker-during-cordon", [], FaultRecord("kill", recovery_s=7.0))
    violated = outcome("node-replacement/x", ["node a and its successors all out of service at resourceVersion 84"])
    unjudged = outcome("node-burst/y", [], FaultRecord("kill"))  # struck, recovery never measured
    missed = outcome(
        "node-burst/z", ["fault kill not injected: no drain seen"], FaultRecord("kill", skipped="no drain")
    )
    assert chaos.failed_scenarios([clean, recovered]) == []
    runs = [clean, violated, recovered, unjudged, missed]
    assert chaos.failed_scenarios(runs) == ["node-replacement/x", "node-burst/y", "node-burst/z"]
    assert chaos.summary(runs)["failed"] == ["node-replacement/x", "node-burst/y", "node-burst/z"]


def test_main_exits_1_naming_the_failed_scenarios_and_keeps_the_json_lines(monkeypatch, capsys) -> None:  # noqa: ANN001
    async def run(args: argparse.Namespace) -> dict:
        return chaos.summary([outcome("a/fault-free"), outcome("a/kill", ["a violation"])])

    monkeypatch.setattr(chaos, "amain", run)
    monkeypatch.setattr(chaos, "runtime", SimpleNamespace(run=asyncio.run))  # no process-wide Temporal runtime
    with pytest.raises(SystemExit) as exited:
        chaos.main(["--scenarios", "rep-kill-cordon"])
    assert exited.value.code == 1
    out, err = capsys.readouterr()
    assert json.loads(out.splitlines()[-1])["failed"] == ["a/kill"] and "a/kill" in err

    async def clean(args: argparse.Namespace) -> dict:
        return chaos.summary([outcome("a/fault-free")])

    monkeypatch.setattr(chaos, "amain", clean)
    chaos.main([])  # returns: exit status 0


def test_scenarios_take_keys_and_patterns_in_schedule_order_and_refuse_unknown_names() -> None:
    assert chaos.chosen_schedules("rep-kill-delete,rep-kill-create") == ["rep-kill-create", "rep-kill-delete"]
    reps = chaos.chosen_schedules("rep-*")
    replacing = ("node-replacement", "hetzner-replacement", "ordered-replacement")
    assert len(reps) == 9 and all(chaos.SCHEDULES[k][0] in replacing for k in reps)
    assert chaos.chosen_schedules("rep-hetzner-*") == ["rep-hetzner-kill-create"]
    assert chaos.chosen_schedules("sd-*,rep-kill-cordon") == ["sd-kill-drain", "sd-temporal-restart", "rep-kill-cordon"]
    with pytest.raises(argparse.ArgumentTypeError, match="rep-kill-nothing"):
        chaos.chosen_schedules("rep-kill-cordon,rep-kill-nothing")
