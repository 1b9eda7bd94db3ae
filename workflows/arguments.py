"""A signal's or update's arguments checked against its handler's signature before the handler
runs, for every workflow the worker serves (registered in worker.py).

The SDK (temporalio 1.35) decodes a message's arguments with the handler's type hints only when
their count matches the hints; otherwise it hands the raw JSON values on, and the handler, called
with too few, too many or mistyped values, raises inside the workflow. An exception in a signal
handler, or in an update handler without a validator, fails the workflow task: the workflow
stalls, retrying that task, for as long as the message is in its history. Measured: a signal
with one argument sent with none, or with two, and an update sent with none, each left its
workflow unable to answer a query. Here such a signal is dropped (logged, as the SDK drops one
it cannot decode) and such an update is refused naming the argument ("field: reason", like the
validators), before any state is touched.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    HandleSignalInput,
    HandleUpdateInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)


class MessageArguments(Interceptor):
    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _CheckedMessages


class _CheckedMessages(WorkflowInboundInterceptor):
    async def handle_signal(self, input: HandleSignalInput) -> None:
        problem = argument_problem(_handler("signals", input.signal), input.args)
        if problem:
            workflow.logger.warning("dropped signal %s: %s", input.signal, problem)
            return
        await super().handle_signal(input)

    def handle_update_validator(self, input: HandleUpdateInput) -> None:
        problem = argument_problem(_handler("updates", input.update), input.args)
        if problem:
            raise ValueError(problem)
        super().handle_update_validator(input)

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        # An update without a validator meets its arguments here first: an ApplicationError fails
        # the update (any other exception would fail the workflow task).
        problem = argument_problem(_handler("updates", input.update), input.args)
        if problem:
            raise ApplicationError(problem, type="InvalidArguments", non_retryable=True)
        return await super().handle_update_handler(input)


Parameters = list[tuple[str, TypeAdapter[Any], bool]]
# Per handler, by its qualified name: the sandbox imports a workflow module afresh for each run,
# so the function objects differ while the handlers (and this table's size) stay the same.
_PARAMETERS: dict[str, Parameters] = {}


def _handler(kind: str, name: str) -> Callable[..., Any] | None:
    """The handler's function without its self (None for a dynamic handler: it takes anything)."""
    defn = workflow._Definition.must_from_class(type(workflow.instance()))  # the SDK's own table
    handlers = getattr(defn, kind)
    found = handlers.get(name) or handlers.get(None)
    if found is None or found.name is None:
        return None
    return found.fn


def argument_problem(fn: Callable[..., Any] | None, args: Sequence[Any]) -> str:
    """ "" when `args` fit fn's parameters, else "<parameter>: <reason>"."""
    if fn is None:
        return ""
    params = _parameters(fn)
    if len(args) == len(params):
        return ""  # the SDK decoded them with the type hints already
    required = sum(1 for _, _, has_default in params if not has_default)
    if not required <= len(args) <= len(params):
        names = ", ".join(name for name, _, _ in params) or "none"
        count = str(required) if required == len(params) else f"{required} to {len(params)}"
        return f"arguments: takes {count} ({names}), got {len(args)}"
    for (name, adapter, _), value in zip(params, args, strict=False):
        try:
            adapter.validate_python(value)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return f"{name}{'.' + where if where else ''}: {first['msg']}"
    return ""


def _parameters(fn: Callable[..., Any]) -> Parameters:
    """(name, a validator of its type, has a default) per parameter after self."""
    key = f"{fn.__module__}.{fn.__qualname__}"
    if key not in _PARAMETERS:
        hints = typing.get_type_hints(fn)
        params = list(inspect.signature(fn).parameters.values())[1:]
        _PARAMETERS[key] = [
            (p.name, TypeAdapter(hints.get(p.name, Any)), p.default is not inspect.Parameter.empty) for p in params
        ]
    return _PARAMETERS[key]
