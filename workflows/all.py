"""Every workflow the worker registers: each loop package's list."""

from workflows import components, fleet, nodes

WORKFLOWS = [*nodes.WORKFLOWS, *fleet.WORKFLOWS, *components.WORKFLOWS]
