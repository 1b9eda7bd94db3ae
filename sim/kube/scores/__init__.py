"""The kube-scheduler's score plugins, as the simulated cluster runs them.

The cluster double's own reading of kubernetes/kubernetes pkg/scheduler/framework/plugins
(1.31-1.34 semantics), sharing no code with growth's planner. The default profile
(pkg/scheduler/apis/config/v1/default_plugins.go) weighs TaintToleration 3, NodeAffinity 2,
NodeResourcesFit 1, PodTopologySpread 2, InterPodAffinity 2, NodeResourcesBalancedAllocation 1,
ImageLocality 1, and binds the pod to a node with the highest weighted sum. Modelled here:
NodeResourcesFit's score and NodeResourcesBalancedAllocation (`noderesources.py`) and
TaintToleration's (`tainttoleration.py`); the others give every node the same score in what the
simulator runs (see docs/nodes.md, Scoring).
"""
