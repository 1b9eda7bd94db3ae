"""Every workflow the worker registers."""

from workflows.node_autoscaler import NodeAutoscalerWorkflow
from workflows.node_request import NodeRequestWorkflow

WORKFLOWS = [NodeAutoscalerWorkflow, NodeRequestWorkflow]
