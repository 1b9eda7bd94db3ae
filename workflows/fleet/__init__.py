"""The fleet loop's workflows: FleetAutoscaler (a provider region) and DataPlaneCluster."""

from workflows.fleet.autoscaler import FleetAutoscalerWorkflow
from workflows.fleet.cluster import DataPlaneClusterWorkflow

WORKFLOWS = [FleetAutoscalerWorkflow, DataPlaneClusterWorkflow]
