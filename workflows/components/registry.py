"""The components loop's workflows, as the worker registers them."""

from workflows.components.autoscaler import ComponentAutoscalerWorkflow

WORKFLOWS = [ComponentAutoscalerWorkflow]
