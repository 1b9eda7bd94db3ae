"""Parsing the loops' own source in tests that check its shape."""

from __future__ import annotations

import ast

ATTEMPTS = 3


def parse(source: str) -> ast.Module:
    """`ast.parse`, tried again on CPython 3.11's SystemError "AST constructor recursion depth
    mismatch": the depth counter is shared by every thread (python/cpython#106905, fixed in
    3.12), and a worker thread left by an earlier test in the same process can be building an
    AST at the same moment. Seen once in a full `make test`."""
    for _ in range(ATTEMPTS - 1):
        try:
            return ast.parse(source)
        except SystemError:
            continue
    return ast.parse(source)
