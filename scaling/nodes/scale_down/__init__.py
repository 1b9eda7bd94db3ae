"""Scale-down: which nodes to remove and when, the re-check before a drain, and storage safety."""
