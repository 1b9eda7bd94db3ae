"""Disruption as Karpenter's NodePool defines it: budgets with schedules, do-not-disrupt, drift and
expiry. Pure rules; the scale-down planner and the loop call them."""
