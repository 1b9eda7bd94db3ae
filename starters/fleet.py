"""`growth-fleet`: start and steer the FleetAutoscaler of one provider region.

    growth-fleet [--config growth.yaml] [--provider aws] [--region us-east-1] start --fleet-config fleet.yaml
                                              [--interval 30] ... (one flag per FleetAutoscalerSettings field)
    growth-fleet status [--json]              clusters with phase and capacity, instances, counters
    growth-fleet create-instance ID --type standard --size x1
    growth-fleet delete-instance ID
    growth-fleet approve-deletion CLUSTER | block-deletion CLUSTER
    growth-fleet pause | resume

Connects to Temporal as the worker does (the same settings file). The fleet configuration
(seed 000's provider, dynamic-scaling, instance-type and prewarming sections) is validated
before the loop starts; errors name the field.
Exit codes: 0 done, 1 no such loop or Temporal unreachable, 2 refused (bad input, or by the workflow).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from pydantic import ValidationError
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities.settings import Settings, SettingsError, load_settings
from activities.updates import execute_update, query
from scaling.fleet.config import FleetConfigError, load_fleet_config
from scaling.fleet.contracts import CreateInstanceRequest, InstancePlacement, autoscaler_workflow_id
from scaling.fleet.region import FleetAutoscalerInput, FleetAutoscalerSettings, RegionStatus
from starters.autoscaler import RPC_TIMEOUT, CliError, _cause
from starters.settings_flags import add_model_flags, flag_for, given
from worker import connect
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow
from workflows.search import PROVIDER, REGION

START_HELP = {
    "interval_s": "seconds between evaluations",
    "recheck_delay_s": "seconds between marking a cluster deprovisioning and its re-check",
    "deletion_requires_approval": "remove an empty cluster only after approve-deletion",
    "failure_backoff_s": "seconds without a new cluster of a type after one failed",
    "flap_window_s": "a scale-up this soon after a removal counts as a flap",
    "max_clusters": "most clusters the region's registry holds",
    "max_instances": "most instances the region holds",
    "iterations_per_run": "evaluations per run before continue-as-new",
    "use_search_attributes": "set Growth* search attributes (register them on the namespace first)",
    "cluster_timeouts": "JSON: provisioning_s, step_s, agent_s, deletion_s, poll_s",
    "cluster_reports_per_run": "agent reports per cluster run before continue-as-new",
    "fleetshard_parameters": "JSON object: non-secret parameters of the fleetshard addon",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="growth-fleet", description="start and steer a provider region's FleetAutoscaler")
    p.add_argument("--config", help="worker settings YAML (default: $GROWTH_CONFIG; Temporal connection only)")
    p.add_argument(
        "--provider", default=os.environ.get("GROWTH_FLEET_PROVIDER", "aws"), help="cloud provider (default aws)"
    )
    p.add_argument(
        "--region", default=os.environ.get("GROWTH_FLEET_REGION", "us-east-1"), help="region (default us-east-1)"
    )
    sub = p.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start fleet/<provider>/<region> (no-op if it runs already)")
    start.add_argument("--fleet-config", required=True, help="fleet configuration YAML (seed 000's shapes)")
    add_model_flags(start, FleetAutoscalerSettings, skip=frozenset({"provider", "region"}), help_text=START_HELP)
    status = sub.add_parser("status", help="clusters with phase and capacity, instances, counters")
    status.add_argument("--json", action="store_true", help="the full status as JSON")
    create = sub.add_parser("create-instance", help="create a managed instance (placed, or waiting for a cluster)")
    create.add_argument("id")
    create.add_argument("--type", dest="instance_type", required=True, help="instance type, e.g. standard")
    create.add_argument("--size", required=True, help="size of the type, e.g. x1")
    sub.add_parser("delete-instance", help="delete a managed instance").add_argument("id")
    sub.add_parser("approve-deletion", help="allow removing CLUSTER once it is empty").add_argument("cluster")
    sub.add_parser("block-deletion", help="never remove CLUSTER (calls off a removal not yet confirmed)").add_argument(
        "cluster"
    )
    sub.add_parser("pause", help="stop creating and removing clusters (placement goes on)")
    sub.add_parser("resume", help="evaluate again")
    return p.parse_args(argv)


def start_settings(args: argparse.Namespace) -> FleetAutoscalerSettings:
    flags = given(args, [f for f in FleetAutoscalerSettings.model_fields if f not in ("provider", "region")])
    try:
        return FleetAutoscalerSettings.model_validate({**flags, "provider": args.provider, "region": args.region})
    except ValidationError as err:
        e = err.errors()[0]
        raise CliError(f"{flag_for(str(e['loc'][0]))}: {e['msg']}", 2) from None


async def start(client: Client, settings: Settings, args: argparse.Namespace) -> str:
    try:
        config = load_fleet_config(args.fleet_config)
    except FleetConfigError as err:
        raise CliError(f"{args.fleet_config}: {err}", 2) from None
    except OSError as err:
        raise CliError(f"--fleet-config: {err}", 2) from None
    if config.region(args.provider, args.region) is None:
        raise CliError(f"{args.fleet_config}: supported_providers has no {args.provider}/{args.region}", 2)
    fleet = start_settings(args)
    wf_id = autoscaler_workflow_id(args.provider, args.region)
    attrs = None
    if fleet.use_search_attributes:
        attrs = TypedSearchAttributes(
            [SearchAttributePair(PROVIDER, args.provider), SearchAttributePair(REGION, args.region)]
        )
    try:
        handle = await client.start_workflow(
            FleetAutoscalerWorkflow.run,
            FleetAutoscalerInput(settings=fleet, config=config),
            id=wf_id,
            task_queue=settings.temporal.task_queue,
            search_attributes=attrs,
        )
    except WorkflowAlreadyStartedError:
        return f"FleetAutoscaler {wf_id} is already running (terminate it to change its settings)"
    return f"started FleetAutoscaler {wf_id} (run {handle.result_run_id}) on task queue {settings.temporal.task_queue}"


def format_status(s: RegionStatus) -> str:
    lines = [
        f"FleetAutoscaler fleet/{s.provider}/{s.region}: {'PAUSED' if s.paused else 'running'}, "
        f"{s.evaluations} evaluations, run {s.runs}",
        f"instances: {s.instances_placed} placed, {s.instances_waiting} waiting",
        f"clusters: {s.clusters_created} created, {s.clusters_deleted} deleted, {s.clusters_failed} failed, flaps {s.flaps}",
    ]
    if s.clusters:
        lines.append(f"  {'CLUSTER':<36} {'TYPE':<10} {'PHASE':<38} {'USED/MAX UNITS':>14}  INSTANCES")
        for c in s.clusters:
            units = f"{c.consumed_units}/{c.max_units if c.max_units is not None else '?'}"
            flags = " blocked" if c.deletion_blocked else (" approved" if c.deletion_approved else "")
            lines.append(f"  {c.id:<36} {c.instance_type:<10} {c.phase.value:<38} {units:>14}  {c.instances}{flags}")
    for t in s.last_evaluation:
        remove = f", remove {t.remove.cluster_id}" if t.remove else ""
        lines.append(
            f"{t.instance_type}: scale-up {'yes' if t.scale_up.needed else 'no'} ({t.scale_up.reason.value}), "
            f"free {t.scale_up.free_units}/{t.scale_up.total_units} units{remove}"
        )
    if s.awaiting_approval:
        lines.append(f"awaiting approval to remove: {', '.join(s.awaiting_approval)}")
    if s.events:
        lines.append("recent:")
        lines.extend(f"  {e}" for e in s.events[-10:])
    return "\n".join(lines)


def format_placement(p: InstancePlacement) -> str:
    where = f"placed on {p.cluster_id}" if p.cluster_id else "waiting for a ready cluster with room"
    return f"instance {p.id} ({p.instance_type} {p.size}, {p.units} units): {where}"


async def run_command(client: Client, settings: Settings, args: argparse.Namespace) -> str:
    if args.command == "start":
        return await start(client, settings, args)
    wf_id = autoscaler_workflow_id(args.provider, args.region)
    handle: WorkflowHandle = client.get_workflow_handle(wf_id)
    if args.command == "status":
        status: RegionStatus = await query(handle, FleetAutoscalerWorkflow.status, rpc_timeout=RPC_TIMEOUT)
        return status.model_dump_json(indent=2) if args.json else format_status(status)
    if args.command == "create-instance":
        req = CreateInstanceRequest(id=args.id, instance_type=args.instance_type, size=args.size)
        placed = await execute_update(handle, FleetAutoscalerWorkflow.create_instance, req, rpc_timeout=RPC_TIMEOUT)
        return format_placement(placed)
    if args.command == "delete-instance":
        gone = await execute_update(handle, FleetAutoscalerWorkflow.delete_instance, args.id, rpc_timeout=RPC_TIMEOUT)
        if not gone:
            raise CliError(f"no instance {args.id} in {wf_id}", 2)
        return f"instance {args.id} deleted"
    if args.command in ("approve-deletion", "block-deletion"):
        approve = args.command == "approve-deletion"
        update = FleetAutoscalerWorkflow.approve_deletion if approve else FleetAutoscalerWorkflow.block_deletion
        await execute_update(handle, update, args.cluster, rpc_timeout=RPC_TIMEOUT)
        return f"deletion of {args.cluster} {'approved' if approve else 'blocked'}"
    if args.command in ("pause", "resume"):
        signal = FleetAutoscalerWorkflow.pause if args.command == "pause" else FleetAutoscalerWorkflow.resume
        await handle.signal(signal, rpc_timeout=RPC_TIMEOUT)
        return f"{args.command} sent to {wf_id}"
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
            wf_id = autoscaler_workflow_id(args.provider, args.region)
            raise CliError(
                f"no running FleetAutoscaler {wf_id} in namespace {settings.temporal.namespace}"
                f" (start it with: growth-fleet --provider {args.provider} --region {args.region} start --fleet-config ...)"
            ) from None
        raise CliError(f"Temporal refused the call: {err}") from None


def run(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        print(asyncio.run(amain(args)), flush=True)
    except CliError as err:
        print(f"growth-fleet: {err}", file=sys.stderr, flush=True)
        return err.code
    return 0


def main(argv: list[str] | None = None) -> None:
    code = run(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # see starters.autoscaler.main: the SDK's native threads can abort a normal exit


if __name__ == "__main__":
    main()
