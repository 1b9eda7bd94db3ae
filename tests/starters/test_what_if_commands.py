"""`growth nodes what-if` replays the recorded loops; `growth nodes what-if consolidate` (the
words issue 32 and Karpenter users use) reads the cluster now. Both parse to their own Call."""

from __future__ import annotations

from starters.cli import REFUSED, Call, parse
from starters.nodes_consolidate import format_consolidation
from starters.nodes_what_if import format_report


def test_what_if_consolidate_is_what_ifs_subcommand_and_what_if_alone_still_replays() -> None:
    call, options = parse(["nodes", "--cluster", "prod", "what-if", "consolidate", "-o", "json"])
    assert isinstance(call, Call) and call.table is format_consolidation
    assert options["output"] == "json"
    replay, _ = parse(["nodes", "what-if", "--history", "nodes.json", "--max-nodes-total", "10"])
    assert isinstance(replay, Call) and replay.table is format_report and not replay.needs_client


def test_an_unknown_what_if_subcommand_is_a_usage_error() -> None:
    code, _ = parse(["nodes", "what-if", "consolidation"])
    assert code == REFUSED
