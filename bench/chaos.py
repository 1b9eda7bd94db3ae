"""`make chaos`: the real stack under faults, and the invariants checked after each run.

The stack is the demo's: the Temporal dev server on a database file, the simulated cluster and
two growth workers on one task queue (as deploy/base/worker.yaml runs them). Each scenario runs a
loop's workload with a fault schedule, then checks the invariants (issue 20):

- every pod runs; nodes created equal the fault-free run's;
- no second node for one request (a NodeRequest, or a batch member `<batch id>#<index>`: a node's
  request label is its member id's), no node no Ready request accounts for (leaked);
- no workflow failed, terminated or timed out; no non-determinism (a workflow task failed
  with a non-deterministic cause, or said so in a worker log);
- no pod evicted twice (evictions the API server accepted, from the drains' histories); no
  removal that loses data (the scale-down runs beside a 3-replica Longhorn volume, which must
  still read back unchanged);

and prints one JSON line per scenario: the faults injected (or skipped, with why), the
violations (each named) and the recovery per fault: from the fault's end to the moment every
activity that was in progress when it struck has completed (the work it stalled moves again),
or, when all of those completed before the fault ended, to the loop's next completed activity. The last line is JSON over all
scenarios: `scenarios`, `faults_injected`, `invariant_violations` (a count), `recovery_p99_s`,
`failed` (the scenarios that failed).

Faults are pluggable steps (FAULTS): SIGKILL or SIGTERM of the worker running a chosen activity
(observe_cluster, start_node_requests, create_node, a readiness wait), Temporal server kill and
restart on the same database, API server kill and restart (needs a simulated cluster that keeps
its state in a data directory: skipped when `sim.cluster` has no `--data-dir`), an API server
hang (SIGSTOP), and a 5xx/429 storm on node creation. A step too quick to catch is held in
progress by a state the fault sees in the world and that stays put until it strikes, never by
catching a short activity in a poll: the API server holds the first node create unanswered (a
request hold), or a drain's first eviction (the same); the loop's
start of its requests, which only the Temporal server sees, by the workers' own first
NodeRequest or NodeRequestBatch start waiting unsent in front of it (bench/start_hold.py, kill_worker_during_held_start);
its observation by freezing every worker the moment the loop's history shows one scheduled
(kill_worker_taking). Every fault strikes; one that did not is a violation. The node replacement's
scenarios (a worker killed at each step of a NodeReplacement, checked from the API server's
watched states; one on the fake Hetzner API) are in bench/chaos_replacement.py, the Hetzner burst's in bench/chaos_hetzner.py, the fleet loop's in
bench/chaos_fleet.py, the components loop's in bench/chaos_components.py; their processes are
started, stopped and restarted through bench/stack.py.

It exits 1, naming them on stderr (the summary's `failed`), when a scenario reports a violation
or an injected fault with no recovery measured.

python -m bench.chaos [--scenarios 'rep-*,sd-kill-drain'] [--pause-s 60] [--pods 24]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import runtime
from bench.chaos_components import components_ramp
from bench.chaos_fleet import fleet_burst
from bench.chaos_harness import FAULTS, Outcome, check, node_burst, node_scale_down, pause_api_server
from bench.chaos_hetzner import hetzner_burst
from bench.chaos_replacement import node_replacement, ordered_replacement
from starters.scenarios.progress import percentile


async def run_scenario(base: Path, loop: str, names: list[str], pods: int, expected: dict[str, Any]) -> Outcome:
    """One scenario on a fresh stack; `expected` holds the fault-free run's figures (filled by it)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{loop}-", dir=base))
    if loop == "hetzner-burst":
        outcome = await hetzner_burst(workdir, names, pods // 2, expected)
        outcome.scenario = f"{loop}/" + ("+".join(names) or "fault-free")
        return outcome
    if loop in ("node-replacement", "hetzner-replacement"):
        # 6 pods fill two nodes, each replaced by one successor: the count is the scenario's own.
        outcome = await node_replacement(workdir, names, hetzner=loop == "hetzner-replacement")
        if names and outcome.nodes_created != expected.get(loop, outcome.nodes_created):
            outcome.violations.append(f"successors made {outcome.nodes_created}, fault-free run {expected[loop]}")
        expected.setdefault(loop, outcome.nodes_created)
        outcome.scenario = f"{loop}/" + ("+".join(names) or "fault-free")
        return outcome
    if loop == "ordered-replacement":
        outcome = await ordered_replacement(workdir, names)
        outcome.scenario = f"{loop}/" + ("+".join(names) or "fault-free")
        return outcome
    if loop in ("fleet-burst", "components-ramp"):
        if loop == "fleet-burst":
            outcome = await fleet_burst(workdir, names, instances=max(2, pods // 4))
        else:
            outcome = await components_ramp(workdir, names)
        created = outcome.created or {}
        if names and created != expected.get(loop, created):
            outcome.violations.append(f"created {created}, fault-free run {expected[loop]}")
        expected.setdefault(loop, created)
        outcome.scenario = f"{loop}/" + ("+".join(names) or "fault-free")
        return outcome
    faults = [(n, FAULTS[n]) for n in names]
    if loop == "node-burst":
        outcome, stack, temporal = await node_burst(workdir, faults, pods)
    else:
        # The nodes left depend on where the scheduler put the pods (2 or 3 of 8 in fault-free
        # runs alike): reported, not compared.
        outcome, stack, temporal, outcome.nodes_left = await node_scale_down(workdir, faults, pods)
    try:
        await check(stack, temporal, outcome, expected.get(f"{loop}/created"))
    finally:
        stack.stop()
    if not names:
        expected[f"{loop}/created"] = outcome.nodes_created
    outcome.scenario = f"{loop}/" + ("+".join(names) or "fault-free")
    return outcome


# Scenario -> (loop, faults); each loop runs fault-free first, which sets the expected figures.
SCHEDULES: dict[str, tuple[str, list[str]]] = {
    "kill-observe": ("node-burst", ["kill-worker-during-observe"]),
    "kill-start": ("node-burst", ["kill-worker-during-start"]),
    "kill-create": ("node-burst", ["kill-worker-during-create"]),
    "kill-readiness": ("node-burst", ["kill-worker-during-readiness"]),
    "sigterm": ("node-burst", ["sigterm-worker-during-readiness"]),
    "temporal-restart": ("node-burst", ["restart-temporal"]),
    "api-restart": ("node-burst", ["restart-api-server"]),
    "api-pause": ("node-burst", ["pause-api-server"]),
    "storm-503": ("node-burst", ["node-create-503-storm"]),
    "storm-429": ("node-burst", ["node-create-429-storm"]),
    "sd-kill-drain": ("node-scale-down", ["kill-worker-during-drain"]),
    "sd-temporal-restart": ("node-scale-down", ["restart-temporal-during-drain"]),
    "rep-kill-create": ("node-replacement", ["kill-worker-during-successor-create"]),
    "rep-kill-readiness": ("node-replacement", ["kill-worker-during-successor-readiness"]),
    "rep-kill-taint": ("node-replacement", ["kill-worker-during-disrupted-taint"]),
    "rep-kill-cordon": ("node-replacement", ["kill-worker-during-cordon"]),
    "rep-kill-drain": ("node-replacement", ["kill-worker-during-replacement-drain"]),
    "rep-kill-delete": ("node-replacement", ["kill-worker-during-old-node-delete"]),
    "rep-slow-scheduler": ("node-replacement", ["slow-scheduler"]),
    "rep-kill-ordered-evictions": ("ordered-replacement", ["kill-worker-during-ordered-evictions"]),
    "rep-hetzner-kill-create": ("hetzner-replacement", ["kill-worker-during-successor-hetzner-create"]),
    "hz-kill-create": ("hetzner-burst", ["kill-worker-during-hetzner-create"]),
    "hz-500-storm": ("hetzner-burst", ["hetzner-500-storm"]),
    "hz-429-storm": ("hetzner-burst", ["hetzner-429-storm"]),
    "hz-lost-dropped": ("hetzner-burst", ["hetzner-lost-create-dropped"]),
    "hz-lost-502": ("hetzner-burst", ["hetzner-lost-create-502"]),
    "hz-lost-500": ("hetzner-burst", ["hetzner-lost-create-500"]),
    "fleet-kill-ocm-create": ("fleet-burst", ["kill-worker-during-ocm-create"]),
    "fleet-ocm-503": ("fleet-burst", ["ocm-create-503-storm"]),
    "fleet-ocm-429": ("fleet-burst", ["ocm-create-429-storm"]),
    "fleet-ocm-lost-create": ("fleet-burst", ["ocm-lost-create-responses"]),
    "fleet-ocm-create-503-after": ("fleet-burst", ["ocm-create-answered-503"]),
    "fleet-temporal-restart": ("fleet-burst", ["restart-temporal-during-ocm-create"]),
    "comp-prometheus-503": ("components-ramp", ["prometheus-503-storm"]),
    "comp-pd-503": ("components-ramp", ["pd-503-storm"]),
    "comp-prometheus-lost": ("components-ramp", ["prometheus-lost-responses"]),
    "comp-pd-lost": ("components-ramp", ["pd-lost-responses"]),
    "comp-kill-group-create": ("components-ramp", ["kill-worker-during-group-create"]),
    "comp-temporal-restart": ("components-ramp", ["restart-temporal-during-group-create"]),
}


def failed_scenarios(outcomes: list[Outcome]) -> list[str]:
    """The scenarios that fail `make chaos` (it exits 1 naming them): one with an invariant
    violation (a fault that never struck is one), or an injected fault with no recovery measured
    (its run ended before the harness could judge it)."""
    return [
        o.scenario for o in outcomes if o.violations or any(not f.skipped and f.recovery_s is None for f in o.faults)
    ]


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    recoveries = [f.recovery_s for o in outcomes for f in o.faults if f.recovery_s is not None]
    return {
        "scenarios": len(outcomes),
        "faults_injected": sum(1 for o in outcomes for f in o.faults if not f.skipped),
        "invariant_violations": sum(len(o.violations) for o in outcomes),
        "recovery_p99_s": percentile(recoveries, 0.99) if recoveries else None,
        "recovery_max_s": max(recoveries, default=None),
        "failed": failed_scenarios(outcomes),
    }


def chosen_schedules(spec: str) -> list[str]:
    """The schedules a --scenarios value names, in SCHEDULES' order: keys or shell-style patterns
    (`rep-*`), comma-separated; a name that matches none is refused, naming it."""
    patterns = [p.strip() for p in spec.split(",") if p.strip()]
    unknown = [p for p in patterns if not fnmatch.filter(SCHEDULES, p)]
    if unknown or not patterns:
        raise argparse.ArgumentTypeError(f"--scenarios: no schedule matches {', '.join(unknown) or repr(spec)}")
    return [key for key in SCHEDULES if any(fnmatch.fnmatchcase(key, p) for p in patterns)]


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    FAULTS["pause-api-server"] = pause_api_server(args.pause_s)
    base = Path(tempfile.mkdtemp(prefix="growth-chaos-"))
    expected: dict[str, Any] = {}
    outcomes: list[Outcome] = []
    chosen = [SCHEDULES[key] for key in args.scenarios]
    for loop in dict.fromkeys(loop for loop, _ in chosen):
        for names in [[], *(names for lp, names in chosen if lp == loop)]:
            o = await run_scenario(base, loop, names, args.pods, expected)
            outcomes.append(o)
            print(json.dumps(o.line()), flush=True)
    return summary(outcomes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.chaos", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenarios",
        type=chosen_schedules,
        default=list(SCHEDULES),
        help="schedules to run, comma-separated keys or patterns (e.g. 'rep-*,sd-*'; each loop's "
        f"fault-free run comes first) of: {', '.join(SCHEDULES)}",
    )
    parser.add_argument("--pods", type=int, default=24)
    parser.add_argument("--pause-s", type=float, default=60.0, help="how long the API server hangs")
    args = parser.parse_args(argv)
    result = runtime.run(amain(args))
    print(json.dumps(result), flush=True)
    if result["failed"]:
        print(f"make chaos: {len(result['failed'])} scenario(s) failed: {', '.join(result['failed'])}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
