"""A component's planners, one per source of target replicas (the autoscaler's `planner` setting,
and `spec.<component>.external`):

- `rules`: growth's own rules over Prometheus metrics (`plan_growth`);
- `pd`: PD's /autoscaling answer (`plan_from_pd`);
- `external`: an external recommender's replicas (`plan_from_external`).

Each is a pure function returning a `scaling.components.plan.ComponentPlan`; they share how targets
become changes (`targets.Targets`).
"""

from scaling.components.planners.external import plan_from_external
from scaling.components.planners.pd import plan_from_pd
from scaling.components.planners.rules import plan_growth

__all__ = ["plan_from_external", "plan_from_pd", "plan_growth"]
