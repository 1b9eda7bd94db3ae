"""The components loop's workflows: ComponentAutoscaler (one per TidbClusterAutoScaler)."""

from workflows.components.autoscaler import ComponentAutoscalerWorkflow

WORKFLOWS = [ComponentAutoscalerWorkflow]
