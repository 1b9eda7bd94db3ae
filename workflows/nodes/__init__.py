"""The node loop's workflows: NodeAutoscaler, NodeRequest, NodeScaleDown and MachineGC."""

# Empty on purpose: the worker's sandbox imports this package again for every new workflow
# instance, so it must not import every workflow module (registry.py lists them).
