"""The fleet loop's workflows, as the worker registers them."""

from workflows.fleet.autoscaler import FleetAutoscalerWorkflow
from workflows.fleet.cluster import DataPlaneClusterWorkflow

WORKFLOWS = [FleetAutoscalerWorkflow, DataPlaneClusterWorkflow]
