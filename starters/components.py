"""`growth-components`: start and steer the ComponentAutoscaler of one TidbClusterAutoScaler.

    growth-components [--config growth.yaml] -n NAMESPACE NAME start [--planner growth|pd] [--scan-interval 30] ...
                                              (one flag per ComponentAutoscalerSettings field)
    growth-components -n NS NAME status [--json]     groups, replicas, intervals, errors, counters
    growth-components -n NS NAME pause | resume
    growth-components -n NS NAME pin --component tikv [--cluster auto-xxxx] REPLICAS
    growth-components -n NS NAME unpin --component tikv [--cluster auto-xxxx]
    growth-components -n NS NAME block-scale-in [--component tikv|tidb|*] | unblock-scale-in [...]

Connects to Temporal as the worker does (the same settings file). The workflow id is
components/<namespace>/<name>. Exit codes: 0 done, 1 no such loop or Temporal unreachable,
2 refused (bad input, or by the workflow's validator).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from pydantic import ValidationError
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities.settings import Settings, SettingsError, load_settings
from activities.updates import execute_update, query
from scaling.components.state import (
    AutoscalerReport,
    BlockScaleInRequest,
    ComponentAutoscalerInput,
    ComponentAutoscalerSettings,
    PinRequest,
)
from starters.autoscaler import RPC_TIMEOUT, CliError, _cause
from starters.settings_flags import add_model_flags, flag_for, given
from worker import connect
from workflows.components.autoscaler import ComponentAutoscalerWorkflow, workflow_id

FIXED = frozenset({"namespace", "name"})
START_HELP = {
    "kube_cluster": "which of the worker's clusters holds the objects (default: its kubernetes: connection)",
    "planner": "growth: seed 002's algorithm in growth; pd: ask PD's /autoscaling",
    "scan_interval_s": "seconds between rounds (intervals between changes come from the object's spec)",
    "iterations_per_run": "rounds per run before continue-as-new",
    "activity_timeout_s": "seconds one activity may take",
    "gone_rounds": "rounds the object must be missing before the loop ends",
    "use_search_attributes": "set GrowthCluster/GrowthPhase (register them on the namespace first)",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="growth-components", description="start and steer a TidbClusterAutoScaler's loop")
    p.add_argument("--config", help="worker settings YAML (default: $GROWTH_CONFIG; Temporal connection only)")
    p.add_argument("-n", "--namespace", default=os.environ.get("GROWTH_COMPONENTS_NAMESPACE", "default"))
    p.add_argument("name", help="the TidbClusterAutoScaler's name")
    sub = p.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start components/<namespace>/<name> (no-op if it runs already)")
    add_model_flags(start, ComponentAutoscalerSettings, skip=FIXED, help_text=START_HELP)
    status = sub.add_parser("status", help="groups, replicas, intervals, errors, counters")
    status.add_argument("--json", action="store_true", help="the full report as JSON")
    sub.add_parser("pause", help="stop changing replicas (status is still written)")
    sub.add_parser("resume", help="scale again")
    for cmd, text in (("pin", "hold a cluster's replicas at REPLICAS"), ("unpin", "let the autoscaler decide again")):
        sp = sub.add_parser(cmd, help=text)
        sp.add_argument("--component", required=True, choices=["tikv", "tidb"])
        sp.add_argument("--cluster", default="", help="an auto-<hash> group (default: the base TidbCluster)")
        if cmd == "pin":
            sp.add_argument("replicas", type=int)
    for cmd in ("block-scale-in", "unblock-scale-in"):
        sp = sub.add_parser(cmd, help=f"{cmd.split('-')[0]} scale-in for a component (or all)")
        sp.add_argument("--component", default="*", help="tikv, tidb or * (default)")
    return p.parse_args(argv)


def start_settings(args: argparse.Namespace) -> ComponentAutoscalerSettings:
    flags = given(args, [f for f in ComponentAutoscalerSettings.model_fields if f not in FIXED])
    try:
        return ComponentAutoscalerSettings.model_validate({**flags, "namespace": args.namespace, "name": args.name})
    except ValidationError as err:
        e = err.errors()[0]
        raise CliError(f"{flag_for(str(e['loc'][0]))}: {e['msg']}", 2) from None


async def start(client: Client, settings: Settings, args: argparse.Namespace) -> str:
    s = start_settings(args)
    wf_id = workflow_id(s.namespace, s.name)
    # Search attributes (when enabled) are set by the workflow once it has read its base cluster.
    try:
        handle = await client.start_workflow(
            ComponentAutoscalerWorkflow.run,
            ComponentAutoscalerInput(settings=s),
            id=wf_id,
            task_queue=settings.temporal.task_queue,
        )
    except WorkflowAlreadyStartedError:
        return f"ComponentAutoscaler {wf_id} is already running (terminate it to change its settings)"
    return (
        f"started ComponentAutoscaler {wf_id} (run {handle.result_run_id}) on task queue {settings.temporal.task_queue}"
    )


def format_report(r: AutoscalerReport) -> str:
    state = "PAUSED" if r.paused else "running"
    lines = [
        f"ComponentAutoscaler components/{r.namespace}/{r.name} ({r.planner} planner) for TidbCluster "
        f"{r.base_cluster or '?'}: {state}, {r.rounds} rounds, run {r.runs}",
        f"counters: {r.counters.homogeneous_scale_outs} homogeneous and {r.counters.storage_scale_outs} storage "
        f"scale-outs, {r.counters.heterogeneous_scale_outs} heterogeneous, {r.counters.scale_ins} scale-ins, "
        f"{r.counters.groups_deleted} groups deleted",
    ]
    for e in r.errors:
        lines.append(f"INVALID {e.field}: {e.message}")
    for component, cs in sorted(r.components.items()):
        last = cs.timing.last_change_at.isoformat() if cs.timing.last_change_at else "never"
        lines.append(f"{component}: homogeneous {cs.homogeneous_replicas}, last change {last}")
        for name, g in sorted(cs.groups.items()):
            lines.append(f"  {name:<18} {g.group:<36} {g.resource_type:<16} replicas {g.replicas} {g.phase}")
        if cs.deferred_until:
            waits = ", ".join(f"{c.cluster} {c.from_replicas}->{c.to_replicas}" for c in cs.deferred)
            lines.append(f"  waiting for the interval until {cs.deferred_until.isoformat()}: {waits}")
        if cs.headroom:
            lines.append(
                "  needs nodes for: "
                + ", ".join(f"{h.count} x {h.resource_type or 'homogeneous'}" for h in cs.headroom)
            )
        if cs.metrics_error:
            lines.append(f"  metrics: {cs.metrics_error}")
        lines.extend(f"  {n}" for n in cs.notes)
    ov = r.overrides
    if ov.pins or ov.block_scale_in:
        lines.append(f"overrides: pins {ov.pins or '-'}, scale-in blocked for {ov.block_scale_in or '-'}")
    if r.messages:
        lines.append("recent:")
        lines.extend(f"  {m}" for m in r.messages[-10:])
    return "\n".join(lines)


async def run_command(client: Client, settings: Settings, args: argparse.Namespace) -> str:
    if args.command == "start":
        return await start(client, settings, args)
    wf_id = workflow_id(args.namespace, args.name)
    handle: WorkflowHandle = client.get_workflow_handle(wf_id)
    wf = ComponentAutoscalerWorkflow
    if args.command == "status":
        report: AutoscalerReport = await query(handle, wf.status, rpc_timeout=RPC_TIMEOUT)
        return report.model_dump_json(indent=2) if args.json else format_report(report)
    if args.command in ("pause", "resume"):
        await execute_update(handle, wf.pause if args.command == "pause" else wf.resume, rpc_timeout=RPC_TIMEOUT)
        return f"{wf_id} {args.command}d"
    if args.command in ("pin", "unpin"):
        req = PinRequest(
            component=args.component, cluster=args.cluster, replicas=args.replicas if args.command == "pin" else None
        )
        pins = await execute_update(handle, wf.pin_replicas, req, rpc_timeout=RPC_TIMEOUT)
        return f"pins now: {pins or 'none'}"
    if args.command in ("block-scale-in", "unblock-scale-in"):
        req2 = BlockScaleInRequest(component=args.component, blocked=args.command == "block-scale-in")
        blocked = await execute_update(handle, wf.block_scale_in, req2, rpc_timeout=RPC_TIMEOUT)
        return f"scale-in blocked for: {', '.join(blocked) or 'none'}"
    raise CliError(f"unknown command {args.command}", 2)


async def amain(args: argparse.Namespace) -> str:
    try:
        settings = load_settings(args.config)
    except SettingsError as err:
        raise CliError(str(err)) from None
    try:
        client = await connect(settings.temporal)
    except RuntimeError as err:
        raise CliError(f"cannot connect to Temporal at {settings.temporal.address}: {err}") from None
    try:
        return await run_command(client, settings, args)
    except WorkflowUpdateFailedError as err:
        raise CliError(f"refused: {_cause(err)}", 2) from None
    except WorkflowQueryFailedError as err:
        raise CliError(f"query failed: {err}", 1) from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise CliError(
                f"no running ComponentAutoscaler {workflow_id(args.namespace, args.name)} in namespace "
                f"{settings.temporal.namespace} (start it with: growth-components -n {args.namespace} {args.name} start)"
            ) from None
        raise CliError(f"Temporal refused the call: {err}") from None


def run(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        print(asyncio.run(amain(args)), flush=True)
    except CliError as err:
        print(f"growth-components: {err}", file=sys.stderr, flush=True)
        return err.code
    return 0


def main(argv: list[str] | None = None) -> None:
    code = run(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # see starters.autoscaler.main: the SDK's native threads can abort a normal exit


if __name__ == "__main__":
    main()
