"""Every workflow the worker registers."""

from workflows.machine_gc import MachineGCWorkflow
from workflows.node_autoscaler import NodeAutoscalerWorkflow
from workflows.node_request import NodeRequestWorkflow
from workflows.node_scale_down import NodeScaleDownWorkflow

WORKFLOWS = [NodeAutoscalerWorkflow, NodeRequestWorkflow, NodeScaleDownWorkflow, MachineGCWorkflow]
