"""`growth`: one command for the three loops, the worker and the demo.

    growth nodes [--cluster NAME] start | status | pause | resume | request ID | cancel-request ID | ban-pool GROUP/POOL
                 | unban-pool | protect-node NODE | unprotect-node | remove-node | explain pod|node NAME
                 | what-if [--node-groups F] | what-if consolidate | trail NODE
    growth fleet [--provider aws] [--region us-east-1] start --fleet-config F | status | create-instance ID
                 | delete-instance ID | approve-deletion CLUSTER | block-deletion CLUSTER | pause | resume
                 | what-if [--fleet-config F] | trail CLUSTER
    growth components -n NAMESPACE NAME start | status | pause | resume | pin | unpin | block-scale-in
                 | unblock-scale-in | trail
    growth worker [--config F]        growth demo [--scenario burst] ...
    growth completion bash|zsh|fish   (eval "$(growth completion bash)")

This module owns what every command shares, in order: settings (`--config` or $GROWTH_CONFIG,
the worker's file, with `--address`, `--temporal-namespace` and `--task-queue` on top) → connect
(exactly as the worker does: mTLS files, API key variable) → dispatch (each command returns a
`Call`; the loop modules `starters.autoscaler`, `starters.fleet`, `starters.components` hold the
commands and their tables) → error mapping → exit code. `-o table|json|yaml` works on every command
and at every level (`growth -o json nodes status` = `growth nodes status -o json`).

Exit codes: 0 done; 1 missing (no such loop, pod or node) or unreachable (Temporal, the cluster,
a settings file); 2 refused (bad input, or refused by the workflow's validator).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import click
import yaml
from pydantic import BaseModel
from temporalio.client import (
    Client,
    RPCError,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import TypedSearchAttributes
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCStatusCode

from activities.settings import Settings, SettingsError, load_settings
from activities.updates import PayloadTooLarge, cause_of, query
from scaling.text import when

RPC_TIMEOUT = timedelta(seconds=30)
DONE, MISSING, REFUSED = 0, 1, 2
OUTPUTS = ("table", "json", "yaml")
F = TypeVar("F", bound=Callable[..., Any])


class CliError(Exception):
    def __init__(self, message: str, code: int = MISSING) -> None:
        super().__init__(message)
        self.code = code


class Done(BaseModel):
    """A command's answer when it has no model of its own (json/yaml: {"message", "data"})."""

    message: str
    data: Any = None


@dataclass(frozen=True)
class Call:
    """What a parsed command does once connected, and how its answer reads as a table."""

    run: Callable[[Client, Settings], Awaitable[Any]]
    table: Callable[[Any], str] = str
    not_found: str = ""  # what is missing, and how to start it, when Temporal says NOT_FOUND
    needs_client: bool = True
    plain: bool = False  # printed as is whatever -o says (a completion script)
    check: Callable[[Settings], object] | None = None  # refuses bad input (CliError) before connecting


def require_served(settings: Settings, cluster: str, flag: str) -> None:
    """Refuse (exit 2) a Kubernetes cluster name the settings do not serve: its loop would
    start and then fail on its first activity (UnknownCluster)."""
    if settings.kube_for(cluster) is None:
        served = ", ".join(sorted(settings.clusters))
        raise CliError(f"{flag} {cluster!r}: not one of the clusters the settings serve ({served})", REFUSED)


async def start_loop(
    client: Client,
    settings: Settings,
    kind: str,
    run: Any,
    inp: BaseModel,
    wf_id: str,
    *,
    summary: str,
    search_attributes: TypedSearchAttributes | None = None,
) -> tuple[WorkflowHandle, str]:
    """Start a loop's workflow `kind` (`growth <loop> start`), or leave the one running as it is:
    its handle, and what was done in words."""
    try:
        handle = await client.start_workflow(
            run,
            inp,
            id=wf_id,
            task_queue=settings.temporal.task_queue,
            search_attributes=search_attributes,
            static_summary=summary,  # the Web UI's workflow list
        )
    except WorkflowAlreadyStartedError:
        text = f"{kind} {wf_id} is already running (settings unchanged; terminate it to change them)"
        return client.get_workflow_handle(wf_id), text
    return handle, f"started {kind} {wf_id} (run {handle.result_run_id}) on task queue {settings.temporal.task_queue}"


async def running_status(handle: WorkflowHandle, query_fn: Any) -> Any:
    """A loop's status query, asked only of a running loop: one that failed, finished or was
    terminated is said so with how it ended (exit 1), never answered from its last state."""
    desc = await handle.describe(rpc_timeout=RPC_TIMEOUT)
    if desc.status != WorkflowExecutionStatus.RUNNING:
        try:
            await handle.result(rpc_timeout=RPC_TIMEOUT)  # closed: answers at once
            how = "it finished"
        except WorkflowFailureError as err:
            how = cause_of(err)
        status = desc.status.name if desc.status else "CLOSED"
        raise CliError(f"{handle.id} is not running: {status} at {when(desc.close_time)}: {how}", MISSING)
    return await query(handle, query_fn, rpc_timeout=RPC_TIMEOUT)


def add_status_command(group: click.Group, call: Callable[..., Call], query_fn: Any, table: Any, text: str) -> None:
    """`growth <loop> status`: the running loop's status query (`call`: the loop's own workflow
    call, with its hint when the loop is not found), printed by `table`."""

    @group.command("status", help=text)
    @shared_options
    @click.pass_obj
    def command(where: Any) -> Call:
        async def run(handle: WorkflowHandle, settings: Settings) -> Any:
            return await running_status(handle, query_fn)

        return call(where, run, table)


def add_signal_command(group: click.Group, call: Callable[..., Call], name: str, signal: Any, text: str) -> None:
    """`growth <loop> NAME`: the loop's signal NAME (pause, resume) sent."""

    @group.command(name, help=text)
    @shared_options
    @click.pass_obj
    def command(where: Any) -> Call:
        async def run(handle: WorkflowHandle, settings: Settings) -> Done:
            await handle.signal(signal, rpc_timeout=RPC_TIMEOUT)
            return Done(message=f"{name} sent to {handle.id}")

        return call(where, run)


def workflow_call(
    wf_id: str,
    not_found: str,
    run: Callable[[WorkflowHandle, Settings], Awaitable[Any]],
    table: Callable[[Any], str] = str,
) -> Call:
    """A command on one loop's workflow: `run` gets its handle; `not_found` says how to start it."""

    async def on(client: Client, settings: Settings) -> Any:
        return await run(client.get_workflow_handle(wf_id), settings)

    return Call(run=on, table=table, not_found=not_found)


@dataclass(frozen=True)
class Passthrough:
    """A command that is its own program (the worker, the demo): run as is, after parsing."""

    main: Callable[[list[str]], None]
    argv: list[str]


# -- shared options: accepted at every level, the innermost given wins --------------------------


def _store(key: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None and value is not False:
            ctx.find_root().meta[f"growth.{key}"] = "json" if key == "output" and value is True else value

    return callback


def shared_options(f: F) -> F:
    """--config, the connection overrides and -o, on every group and command (kopf's way)."""
    options = [
        click.option(
            "--config",
            type=click.Path(dir_okay=False),
            expose_value=False,
            callback=_store("config"),
            help="the worker's settings YAML (default: $GROWTH_CONFIG); the Temporal connection and defaults",
        ),
        click.option("--address", expose_value=False, callback=_store("address"), help="Temporal frontend host:port"),
        click.option(
            "--temporal-namespace", expose_value=False, callback=_store("namespace"), help="Temporal namespace"
        ),
        click.option("--task-queue", expose_value=False, callback=_store("task_queue"), help="the worker's task queue"),
        click.option(
            "-o",
            "--output",
            type=click.Choice(OUTPUTS),
            expose_value=False,
            callback=_store("output"),
            help="table (default), json or yaml",
        ),
        click.option("--json", is_flag=True, hidden=True, expose_value=False, callback=_store("output")),
    ]
    for option in reversed(options):
        f = option(f)
    return f


# -- the root group: loop groups load when named (fast --help and completion) ------------------


class LazyGroup(click.Group):
    LAZY = {
        "nodes": "starters.autoscaler:nodes",
        "fleet": "starters.fleet:fleet",
        "components": "starters.components:components",
        "demo": "starters.demo:demo_command",  # the demo runs in this process until it exits
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.LAZY:
            module, _, attr = self.LAZY[name].partition(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


EXAMPLES = """\b
Examples:
  growth --config growth.yaml nodes --cluster prod start --scan-interval 10
  growth nodes --cluster prod status -o json
  growth nodes explain pod default/web-7f9c
  growth fleet --region us-east-1 start --fleet-config fleet.yaml
  growth components -n tidb db-autoscaler pin --component tikv 5
  growth worker --config growth.yaml
  growth demo --scenario burst --headless
  eval "$(growth completion bash)"

Exit codes: 0 done, 1 missing or unreachable, 2 refused.
"""


@click.group(cls=LazyGroup, epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"]})
@shared_options
def growth() -> None:
    """Start and steer growth's autoscaling loops on Temporal."""


_PASS = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@growth.command("worker", context_settings=_PASS, add_help_option=False)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def worker_command(ctx: click.Context, argv: tuple[str, ...]) -> Passthrough:
    """Run the worker: every workflow and activity (`growth worker --help` for its flags)."""
    import worker

    config = ctx.find_root().meta.get("growth.config")
    return Passthrough(worker.main, (["--config", config] if config else []) + list(argv))


@growth.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion_command(shell: str) -> Call:
    """Print the shell completion script: eval "$(growth completion bash)"."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None  # the choice allows only shells click knows
    script = cls(growth, {}, "growth", "_GROWTH_COMPLETE").source()

    async def run(client: Client, settings: Settings) -> str:
        return script

    return Call(run=run, needs_client=False, plain=True)


# -- parse → settings → connect → run → render ----------------------------------------------------


def parse(argv: list[str]) -> tuple[Call | Passthrough | int, dict[str, Any]]:
    """The command's Call (or an exit code after --help or a usage error) and the shared options."""
    ctx_meta: dict[str, Any] = {}
    try:
        with growth.make_context("growth", list(argv)) as ctx:  # usage and help name the new command
            ctx_meta = ctx.meta
            result = growth.invoke(ctx)
    except click.exceptions.Exit as done:
        return done.exit_code, ctx_meta
    except click.ClickException as err:
        err.show()
        return REFUSED, ctx_meta
    return result, {k.removeprefix("growth."): v for k, v in ctx_meta.items() if k.startswith("growth.")}


def settings_from(options: dict[str, Any]) -> Settings:
    try:
        settings = load_settings(options.get("config"))
    except SettingsError as err:  # names the field and the file
        raise CliError(str(err)) from None
    changes = {k: options[k] for k in ("address", "namespace", "task_queue") if options.get(k)}
    if changes:
        settings.temporal = settings.temporal.model_copy(update=changes)
    return settings


async def execute(call: Call, client: Client, settings: Settings) -> Any:
    """Run a Call, mapping Temporal's answers to exit codes."""
    try:
        return await call.run(client, settings)
    except WorkflowUpdateFailedError as err:
        raise CliError(f"refused: {cause_of(err)}", REFUSED) from None
    except PayloadTooLarge as err:
        raise CliError(f"refused: {err}", REFUSED) from None
    except WorkflowQueryFailedError as err:
        raise CliError(f"query failed: {err}", MISSING) from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND and call.not_found:
            raise CliError(f"{call.not_found} in namespace {settings.temporal.namespace}", MISSING) from None
        raise CliError(f"Temporal refused the call: {err}", MISSING) from None


def render(result: Any, call: Call, output: str) -> str:
    if call.plain:
        return str(result)
    if output == "table":
        return call.table(result) if not isinstance(result, Done) else result.message
    model = result if isinstance(result, BaseModel) else Done(message=str(result))
    if output == "json":
        return model.model_dump_json(indent=2)
    return yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False).rstrip("\n")


async def invoke(client: Client, settings: Settings, argv: list[str]) -> str:
    """One command in this process against a given client (the tests' way in): the rendered answer."""
    call, options = parse(argv)
    if not isinstance(call, Call):
        raise CliError(f"{argv}: not a command that calls Temporal (exit {call})", REFUSED)
    if call.check is not None:
        call.check(settings)
    return render(await execute(call, client, settings), call, options.get("output") or "table")


async def amain(call: Call, options: dict[str, Any]) -> str:
    if not call.needs_client:
        return render(await call.run(None, None), call, options.get("output") or "table")  # type: ignore[arg-type]
    from activities.temporal_client import connect  # not the worker's: its imports are heavy

    settings = settings_from(options)
    if call.check is not None:
        call.check(settings)
    try:
        client = await connect(settings.temporal)
    except RuntimeError as err:  # the SDK raises RuntimeError when it cannot connect
        raise CliError(f"cannot connect to Temporal at {settings.temporal.address}: {err}") from None
    return render(await execute(call, client, settings), call, options.get("output") or "table")


def run_cli(argv: list[str] | None = None, prog: str = "growth") -> int:
    """Run one command; prints its answer (stdout) or the error (stderr); returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    call, options = parse(argv)
    if isinstance(call, int):
        return call
    if isinstance(call, Passthrough):
        call.main(call.argv)
        return DONE
    try:
        print(asyncio.run(amain(call, options)), flush=True)
    except CliError as err:
        print(f"{prog}: {err}", file=sys.stderr, flush=True)
        return err.code
    except BrokenPipeError:  # `growth ... | head`: the reader has all it wanted
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - flushing the closed pipe again would raise
    return DONE


def exit_now(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    # The SDK's core runtime keeps native threads that can abort a normal interpreter shutdown
    # (measured: "PyGILState_Release ... finalizing", exit -6) after the output is written;
    # everything is flushed, so leave without finalizing.
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    # Shell completion (click's _GROWTH_COMPLETE protocol) answers before anything else runs.
    if os.environ.get("_GROWTH_COMPLETE"):
        growth.main(argv, prog_name="growth")
        return
    exit_now(run_cli(argv))


def alias(loop: str, prog: str) -> Callable[[list[str] | None], None]:
    """An old console script (growth-autoscaler, ...) as `growth <loop> ...`."""

    def main_(argv: list[str] | None = None) -> None:
        argv = sys.argv[1:] if argv is None else argv
        exit_now(run_cli([loop, *argv], prog))

    return main_


if __name__ == "__main__":
    # `python -m starters.cli`: the loop modules import `starters.cli`, so run that one copy
    # (its CliError is the one they raise).
    from starters.cli import main as main_

    main_()
