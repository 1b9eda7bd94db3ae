"""Stand-ins for what runs on a fleet's data-plane clusters (the fleetshard-like agent)."""
