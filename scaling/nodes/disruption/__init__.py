"""Disruption as Karpenter's NodePool defines it: budgets with schedules (budgets, ledger), do-not-disrupt,
drift and expiry (drift), what a replacement must buy and save (replacement), and NodeReplacement's
input (orchestration). Pure rules; the scale-down methods, the loop and NodeReplacement call them."""
