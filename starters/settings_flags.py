"""Command-line options generated from a pydantic model's fields, so a field added to
AutoscalerSettings is a `growth nodes start` option without touching the CLI.

A field `readiness_timeout_s` is `--readiness-timeout` (a trailing `_s` means seconds and is
left out of the flag); a bool is `--x/--no-x`; `int | None` accepts `none`; a Literal shows its
values (`--planner growth|pd`); lists, dicts and nested models take JSON. Only the options given
on the command line count (`given`), so the model's default (or the settings file's value) applies
to the rest.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from pydantic import BaseModel, TypeAdapter, ValidationError

from starters.cli import REFUSED, CliError

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M", bound=BaseModel)


def flag_for(field: str) -> str:
    return "--" + (field[:-2] if field.endswith("_s") else field).replace("_", "-")


def validated(model: type[M], values: dict[str, Any], where: Callable[[str], str] = flag_for) -> M:
    """A loop's settings from the options given, or a start refused (exit 2) naming where its
    first error came from (`where`: the option, by default)."""
    try:
        return model.model_validate(values)
    except ValidationError as err:
        e = err.errors()[0]
        raise CliError(f"{where(str(e['loc'][0]) if e['loc'] else '')}: {e['msg']}", REFUSED) from None


def _allows_none(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _metavar(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return "|".join(str(v) for v in typing.get_args(annotation))
    names = {float: "SECONDS", int: "N", str: "TEXT"}
    base = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    return names.get(base[0], "JSON") if len(base) == 1 else "JSON"


class FieldType(click.ParamType):
    """A field's annotation as a click type: lax text first ("10" is a float), then JSON."""

    def __init__(self, annotation: Any) -> None:
        self.annotation = annotation
        self.adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        self.name = _metavar(annotation)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        if _allows_none(self.annotation) and value.strip().lower() in ("none", "null", ""):
            return None
        try:
            return self.adapter.validate_python(value)
        except ValidationError as first:
            try:
                return self.adapter.validate_json(value)
            except ValidationError:
                self.fail(f"{value!r}: {first.errors()[0]['msg']}", param, ctx)

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        if typing.get_origin(self.annotation) is typing.Literal:
            values = [str(v) for v in typing.get_args(self.annotation)]
            return [click.shell_completion.CompletionItem(v) for v in values if v.startswith(incomplete)]
        return []


def model_options(
    model: type[BaseModel],
    *,
    skip: frozenset[str] = frozenset(),
    aliases: Mapping[str, list[str]] | None = None,
    help_text: Mapping[str, str] | None = None,
) -> Callable[[F], F]:
    """A decorator adding one option per field of `model` (the parameter is the field's name)."""

    def decorate(f: F) -> F:
        for name, info in reversed(list(model.model_fields.items())):  # click lists them in declaration order
            if name in skip:
                continue
            flag = flag_for(name)
            more = (aliases or {}).get(name, [])
            text = (help_text or {}).get(name) or info.description or name.replace("_", " ")
            default = "none" if info.default is None else info.default
            seconds = " s" if name.endswith("_s") else ""
            help_ = f"{text} (default: {default}{seconds})" if not info.is_required() else text
            if info.annotation is bool:
                decls = [f"{flag}/--no-{flag[2:]}", *(f"{a}/--no-{a[2:]}" for a in more)]
                f = click.option(*decls, name, default=None, help=help_)(f)
            else:
                f = click.option(
                    flag,
                    *more,
                    name,
                    type=FieldType(info.annotation),
                    # Floats are seconds by the `_s` naming rule; a float without it is a plain number.
                    metavar=_metavar(info.annotation).replace("SECONDS", "SECONDS" if seconds else "NUMBER"),
                    help=help_,
                )(f)
        return f

    return decorate


def given(ctx: click.Context, fields: list[str]) -> dict[str, Any]:
    """The fields whose options were given on the command line (or in their environment variable)."""
    sources = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    return {name: ctx.params[name] for name in fields if ctx.get_parameter_source(name) in sources}
