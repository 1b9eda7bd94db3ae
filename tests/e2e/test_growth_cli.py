"""The `growth` command itself: help with examples, shell completion, the worker and demo behind
it, the old names as aliases, and the exit codes (0 done, 1 missing or unreachable, 2 refused)
before any workflow is involved. The installed console scripts run as subprocesses where the
process is what is checked (the entry point, exit codes at the process boundary, the worker and
demo behind the command, the old names); the rest runs the command's entry in-process."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import yaml

from starters.processes import free_port
from tests.cli import SCRIPT, growth

UNREACHABLE = ["--address", f"127.0.0.1:{free_port()}"]  # nothing listens there


async def test_help_lists_every_loop_with_examples_and_exit_codes() -> None:
    out = (await growth("--help", process=True)).stdout
    for command in ("nodes", "fleet", "components", "worker", "demo", "completion"):
        assert f"  {command} " in out, command
    assert "Examples:" in out and "Exit codes: 0 done, 1 missing or unreachable, 2 refused." in out
    for loop, commands in {
        "nodes": ["start", "status", "pause", "resume", "cancel-request", "ban-pool", "unban-pool", "protect-node",
                  "unprotect-node", "remove-node", "explain"],
        "fleet": ["start", "status", "create-instance", "delete-instance", "approve-deletion", "block-deletion",
                  "pause", "resume"],
        "components NAME": ["start", "status", "pause", "resume", "pin", "unpin", "block-scale-in",
                            "unblock-scale-in"],
    }.items():  # fmt: skip
        text = (await growth(*loop.split()[:1], *(["x"] if "NAME" in loop else []), "--help")).stdout
        assert "Examples:" in text and "-o, --output [table|json|yaml]" in text
        for command in commands:
            assert f"  {command} " in text, f"{loop} {command}"


async def test_shell_completion_completes_commands_and_choices() -> None:
    script = (await growth("completion", "bash")).stdout
    assert "_GROWTH_COMPLETE=bash_complete" in script and "complete " in script
    words = {"COMP_WORDS": "growth nodes st", "COMP_CWORD": "2", "_GROWTH_COMPLETE": "bash_complete"}
    assert (await growth(env=words)).stdout.split() == ["plain,start", "plain,status"]
    words = {"COMP_WORDS": "growth components -n ns db start --planner ", "COMP_CWORD": "7"}
    assert (await growth(env={**words, "_GROWTH_COMPLETE": "bash_complete"})).stdout.split() == [
        "plain,growth",
        "plain,pd",
    ]


async def test_exit_codes_before_any_workflow(tmp_path: Path) -> None:
    # 1: Temporal unreachable (and the settings file missing), named
    down = await growth(*UNREACHABLE, "nodes", "status", expect=1, process=True)
    assert "cannot connect to Temporal at 127.0.0.1:" in down.stderr
    missing = await growth("--config", str(tmp_path / "nope.yaml"), "fleet", "status", expect=1)
    assert "nope.yaml" in missing.stderr
    # 2: bad input, refused with the option's name
    assert "--max-attempts" in (await growth("nodes", "start", "--max-attempts", "many", expect=2)).stderr
    assert "--output" in (await growth("-o", "xml", "nodes", "status", expect=2)).stderr
    assert "No such command" in (await growth("nodes", "scale-up", expect=2)).stderr
    bad = tmp_path / "fleet.yaml"
    bad.write_text("supported_providers: 3\n")
    refused = await growth(*UNREACHABLE, "fleet", "start", "--fleet-config", str(bad), expect=2)
    assert str(bad) in refused.stderr  # checked before connecting


async def test_old_names_are_aliases() -> None:
    for old, loop in (("growth-autoscaler", "nodes"), ("growth-fleet", "fleet"), ("growth-components", "components")):
        script = SCRIPT.parent / old
        argv = [str(script), *UNREACHABLE, *(["db"] if loop == "components" else []), "status"]
        proc = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and proc.stderr.startswith(f"{old}: cannot connect to Temporal"), proc.stderr


async def test_worker_and_demo_run_behind_the_command(tmp_path: Path) -> None:
    # The worker's and the demo's own flags pass through; a bad settings file is named by the worker.
    assert "--config" in (await growth("worker", "--help")).stdout
    assert "--scenario" in (await growth("demo", "--help")).stdout
    bad = tmp_path / "growth.yaml"
    bad.write_text(yaml.safe_dump({"temporal": {"adress": "x"}}))
    failed = await growth("--config", str(bad), "worker", expect=1, process=True)  # the worker's own exit
    assert "temporal.adress" in failed.stderr


async def test_a_completion_script_stays_a_script_whatever_the_output() -> None:
    assert (await growth("-o", "json", "completion", "zsh")).stdout.startswith("#compdef growth")
