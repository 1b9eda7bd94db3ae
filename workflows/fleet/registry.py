"""The fleet loop's workflows, as the worker registers them."""

from workflows.fleet.autoscaler import FleetAutoscalerWorkflow
from workflows.fleet.cluster import DataPlaneClusterWorkflow
from workflows.fleet.index import InstanceIndexWorkflow

WORKFLOWS = [FleetAutoscalerWorkflow, DataPlaneClusterWorkflow, InstanceIndexWorkflow]
