"""Command-line flags generated from a pydantic model's fields, so a field added to
AutoscalerSettings is a `growth-autoscaler start` flag without touching the CLI.

A field `readiness_timeout_s` is `--readiness-timeout` (a trailing `_s` means seconds and is
left out of the flag); a bool is `--x/--no-x`; `int | None` accepts `none`; a Literal shows its
values (`--planner growth|pd`); lists, dicts and nested models take JSON. A flag not given is absent from the parsed namespace, so the model's default
(or the settings file's `autoscaler:` value) applies.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError


def flag_for(field: str) -> str:
    return "--" + (field[:-2] if field.endswith("_s") else field).replace("_", "-")


def _allows_none(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _parser(annotation: Any) -> Callable[[str], Any]:
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)

    def parse(text: str) -> Any:
        if _allows_none(annotation) and text.strip().lower() in ("none", "null", ""):
            return None
        try:
            return adapter.validate_python(text)  # lax mode: "10" is a valid float or int
        except ValidationError as first:
            try:
                return adapter.validate_json(text)  # structured values as JSON
            except ValidationError:
                raise argparse.ArgumentTypeError(f"{text!r}: {first.errors()[0]['msg']}") from None

    parse.__name__ = getattr(annotation, "__name__", str(annotation))  # argparse names it in errors
    return parse


def _metavar(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return "|".join(str(v) for v in typing.get_args(annotation))
    names = {float: "SECONDS", int: "N", str: "TEXT"}
    base = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    return names.get(base[0], "JSON") if len(base) == 1 else "JSON"


def add_model_flags(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    *,
    skip: frozenset[str] = frozenset(),
    aliases: Mapping[str, list[str]] | None = None,
    help_text: Mapping[str, str] | None = None,
) -> list[str]:
    """Add one flag per field of `model` (dest = the field name); returns the field names added."""
    added: list[str] = []
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        flags = [flag_for(name), *(aliases or {}).get(name, [])]
        text = (help_text or {}).get(name) or info.description or name.replace("_", " ")
        default = "none" if info.default is None else info.default
        seconds = " s" if name.endswith("_s") else ""
        help_ = f"{text} (default: {default}{seconds})" if not info.is_required() else text
        if info.annotation is bool:
            parser.add_argument(
                *flags, dest=name, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_
            )
        else:
            parser.add_argument(
                *flags,
                dest=name,
                type=_parser(info.annotation),
                default=argparse.SUPPRESS,
                # Floats are seconds by the `_s` naming rule; a float without it is a plain number.
                metavar=_metavar(info.annotation).replace("SECONDS", "SECONDS" if seconds else "NUMBER"),
                help=help_,
            )
        added.append(name)
    return added


def given(args: argparse.Namespace, fields: list[str]) -> dict[str, Any]:
    """The fields whose flags were given on the command line."""
    return {name: getattr(args, name) for name in fields if hasattr(args, name)}
