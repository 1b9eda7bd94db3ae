"""Scale-up: from pending pods to the nodes to request (demand, packing, planning, limits, backoff)."""
