"""Every workflow the worker registers: each loop package's list."""

from workflows import nodes

WORKFLOWS = [*nodes.WORKFLOWS]
