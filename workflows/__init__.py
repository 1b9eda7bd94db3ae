"""Temporal workflows only: state machines and loops; no I/O, no decisions."""
