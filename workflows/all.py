"""Every workflow the worker registers: each loop package's list."""

from workflows.components.registry import WORKFLOWS as COMPONENTS
from workflows.fleet.registry import WORKFLOWS as FLEET
from workflows.nodes.registry import WORKFLOWS as NODES

WORKFLOWS = [*NODES, *FLEET, *COMPONENTS]
