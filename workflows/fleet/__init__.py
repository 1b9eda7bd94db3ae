"""The fleet loop's workflows: FleetAutoscaler (a provider region) and DataPlaneCluster."""

# Empty on purpose: the worker's sandbox imports this package again for every new workflow
# instance, so it must not import every workflow module (registry.py lists them).
