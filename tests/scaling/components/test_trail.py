"""A ComponentAutoscaler's trail over its recorded history (tests/workflows/histories/0.2.0/
components_ComponentAutoscaler.json): each change with the reason its Event gave."""

from __future__ import annotations

from pathlib import Path

from scaling.components.trail import component_trail
from starters.history import history_from_file

HISTORY = Path(__file__).parents[2] / "workflows" / "histories" / "0.2.0" / "components_ComponentAutoscaler.json"


def test_changes_read_with_their_reasons() -> None:
    trail = component_trail(history_from_file(str(HISTORY)))
    kinds = [e.what for e in trail.entries]
    assert kinds.index("GroupCreate") < kinds.index("GroupCreated") < kinds.index("ScaledOut")
    scaled = [e.detail for e in trail.entries if e.what == "ScaledOut"]
    assert any("tikv" in d and "cpu average over max" in d for d in scaled)
    tikv = component_trail(history_from_file(str(HISTORY)), "tikv")
    assert tikv.entries and all("tikv" in e.detail for e in tikv.entries)
    assert len(tikv.entries) < len(trail.entries)
