"""The nodes loop's workflows, as the worker registers them."""

from workflows.nodes.autoscaler import NodeAutoscalerWorkflow
from workflows.nodes.machine_gc import MachineGCWorkflow
from workflows.nodes.replacement import NodeReplacementWorkflow
from workflows.nodes.request import NodeRequestWorkflow
from workflows.nodes.request_batch import NodeRequestBatchWorkflow
from workflows.nodes.scale_down import NodeScaleDownWorkflow

WORKFLOWS = [
    NodeAutoscalerWorkflow,
    NodeRequestWorkflow,
    NodeRequestBatchWorkflow,
    NodeScaleDownWorkflow,
    NodeReplacementWorkflow,
    MachineGCWorkflow,
]
