"""The kube-scheduler's filter plugins, one module each, as the simulated cluster runs them.

This is the cluster double's own reading of kubernetes/kubernetes
pkg/scheduler/framework/plugins (1.31-1.34 semantics); it shares no code with growth's planner,
so it is the check on it. `cycle.py` runs them for one pod, in the default plugin order, and
keeps the first refusal per node, as the scheduler's framework does.
"""
