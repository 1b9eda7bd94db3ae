"""The Web UI's text for a NodeReplacement (issue 32: each replacement has its own summary): the list
line its start carries (replacement_summary, workflows/nodes/scale_down_step.py) and the details that
follow its phase (replacement_details, workflows/nodes/replacement.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scaling.nodes.disruption.multi_node import MAX_CANDIDATES
from scaling.nodes.disruption.refusals import NOT_WORTH_IT
from scaling.nodes.scale_down.models import NodeState
from scaling.nodes.scale_down.removals import NodeScaleDownInput, ScaleDownPhase, ScaleDownStatus
from scaling.nodes.summaries import replacement_details, replacement_summary, scale_down_details

# Temporal's default limits on a workflow's user metadata (the server's payload data limits): the
# summary 400 bytes, the details 20,000. summaries.py truncates nothing, so its inputs must keep it so.
SUMMARY_LIMIT, DETAILS_LIMIT = 400, 20_000
AT = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def removal(
    kind: NodeState, node: str = "n1", pool: str | None = "kwok-cx42", cluster: str = "c"
) -> NodeScaleDownInput:
    return NodeScaleDownInput(cluster=cluster, node=node, pool=pool, kind=kind.value, scale_down_at=AT)


@pytest.mark.parametrize("kind", [NodeState.DRIFTED, NodeState.EXPIRED, NodeState.CONSOLIDATED])
def test_a_replacement_summary_names_its_node_kind_cluster_and_pool(kind: NodeState) -> None:
    """The workflow list tells a replacement from a plain NodeScaleDown, and why the node goes."""
    line = replacement_summary(removal(kind))
    assert line == f"NodeReplacement n1 ({kind.value.lower()}), cluster c, pool kwok-cx42"
    assert replacement_summary(removal(kind, pool=None)) == f"NodeReplacement n1 ({kind.value.lower()}), cluster c"


def test_a_multi_node_replacement_summary_names_its_first_node_and_counts_the_others() -> None:
    """One command, one workflow: its line says it takes more than the node its id is named after."""
    line = replacement_summary(removal(NodeState.CONSOLIDATED, node="a"), others=2)
    assert line == "NodeReplacement a and up to 2 more (multi-node) (consolidated), cluster c, pool kwok-cx42"
    assert "multi-node" not in replacement_summary(removal(NodeState.CONSOLIDATED, node="a"), others=0)


def test_replacement_details_show_the_successors_progress_until_the_drain() -> None:
    """Marked (the replacement's own phase until its nodes drain): what it is doing now."""
    status = ScaleDownStatus(node="n1", kind="Drifted", message="planning its successor")
    assert replacement_details(status) == "Replacing: planning its successor"
    status.message = "successor nodes/c/replace/n1@0f1e2d3c/node-0: Provisioning (attempt 1)"
    assert replacement_details(status) == f"Replacing: {status.message}"
    status.message = "draining a, b together"  # a multi-node command names its nodes here
    assert replacement_details(status) == "Replacing: draining a, b together"
    assert replacement_details(ScaleDownStatus(node="n1")) == "Replacing"


def test_replacement_details_follow_the_drain_and_say_how_it_ended() -> None:
    """From the drain on, the details are the removal's: its phase, then the outcome and why."""
    draining = ScaleDownStatus(
        node="n1", kind="Expired", phase=ScaleDownPhase.DRAINING, scale_down_at=AT, evicted=["d/a", "d/b"]
    )
    assert replacement_details(draining) == scale_down_details(draining)
    assert replacement_details(draining) == "Draining, removal at 2026-01-01 00:00:00Z, 2 pods evicted"
    refused = ScaleDownStatus(
        node="a",
        kind="Consolidated",
        phase=ScaleDownPhase.CANCELLED,
        reason=NOT_WORTH_IT,
        message="nodes kept: saves 4% of 0.0546/h, under 10%",
    )
    assert (
        replacement_details(refused)
        == f"Finished Cancelled: {NOT_WORTH_IT} (nodes kept: saves 4% of 0.0546/h, under 10%)"
    )
    done = ScaleDownStatus(node="a", phase=ScaleDownPhase.REMOVED, message="2 of 3 nodes removed (a, b)")
    assert replacement_details(done) == "Finished Removed (2 of 3 nodes removed (a, b))"
    # A final phase wins over a message left from the replacing steps.
    failed = ScaleDownStatus(node="n1", phase=ScaleDownPhase.FAILED, reason="ReplacementFailed", message="x")
    assert replacement_details(failed).startswith("Finished Failed: ReplacementFailed")


def test_the_summary_is_one_line_within_temporals_limit_for_the_longest_names_growth_makes() -> None:
    """Temporal limits a summary to 400 bytes by default and summaries.py cuts nothing: with 63-character
    names (a Hetzner server's, a DNS label) and a command of MAX_CANDIDATES nodes it still fits."""
    longest = removal(NodeState.CONSOLIDATED, node="n" * 63, pool="hetzner-" + "x" * 55, cluster="c" * 63)
    line = replacement_summary(longest, others=MAX_CANDIDATES - 1)
    assert "\n" not in line and len(line.encode()) <= SUMMARY_LIMIT
    assert "n" * 63 in line and f"up to {MAX_CANDIDATES - 1} more" in line
    names = ", ".join(f"node-{i:02d}-" + "x" * 54 for i in range(MAX_CANDIDATES))
    status = ScaleDownStatus(node="a", message=f"draining {names} together")
    assert len(replacement_details(status).encode()) <= DETAILS_LIMIT
