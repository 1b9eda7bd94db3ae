"""Values built from plain data (dicts, lists, strings, numbers: what a pod spec and its
pydantic dumps are), kept by the data's repr.

A burst's pods come from a few templates, so the same parts are built again and again; repr
names such data exactly (two reprs are equal only for equal data), is cheaper than building,
and needs no hashable copy. The cache is bounded: when full it starts over."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class ReprMemo(Generic[T]):
    def __init__(self, kept: int) -> None:
        self._values: dict[str, T] = {}
        self._kept = kept

    def get(self, parts: Any, build: Callable[[], T]) -> T:
        """`build()`'s value for `parts`, built once per distinct `parts` while kept."""
        seen = repr(parts)
        value = self._values.get(seen)
        if value is None:
            if len(self._values) >= self._kept:
                self._values.clear()
            value = self._values[seen] = build()
        return value
