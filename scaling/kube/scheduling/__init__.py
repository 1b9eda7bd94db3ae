"""The kube-scheduler's filter plugins, one module each, as the planner and the observer ask them.

Each module holds one plugin's rule: `prefilter(...)` computes what the pod needs once per pod
shape (its ports, its terms, the counts of matching pods per topology domain), and
`filter(state, node) -> Refusal | None` answers for one node with the scheduler's own reason
string. `framework` runs them in the scheduler's order and keeps the first refusal. Nodes are
NodeInfo: a Ready node as observed, or a planned node of a pool (no name, no pods yet).
"""
