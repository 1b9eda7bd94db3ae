"""Garbage collection: machines and records the loop lost track of (leaks, orphans)."""
