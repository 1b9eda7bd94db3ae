"""A NodeRequest attempt's failure message (scaling.nodes.scale_up.requests.failure_message)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st
from temporalio.contrib.pydantic import pydantic_data_converter

from scaling.nodes.models import Attempt, AttemptResult, RequestPhase
from scaling.nodes.scale_up.requests import ATTEMPT_MESSAGE_MAX, NodeRequestStatus, failure_message

TOKEN = "Hetzner API rejected the token (401 unauthorized): the token in $HCLOUD_TOKEN is invalid or revoked"


def test_outer_message_first_then_the_providers_words() -> None:
    assert failure_message([TOKEN, "unable to authenticate (unauthorized)"]) == (
        f"{TOKEN}: unable to authenticate (unauthorized)"
    )


def test_a_cause_the_outer_message_already_quotes_is_not_repeated() -> None:
    inner = "server_limit_exceeded: server limit reached"
    assert failure_message([f"delete failed: {inner}", inner]) == f"delete failed: {inner}"


def test_empty_and_whitespace_messages_are_dropped_and_newlines_flattened() -> None:
    assert failure_message(["", "  ", "no capacity\n  in fsn1", "no capacity in fsn1"]) == "no capacity in fsn1"


def test_bounded_keeping_the_outer_message() -> None:
    text = failure_message([TOKEN, "x" * 5000])
    assert len(text) == ATTEMPT_MESSAGE_MAX
    assert text.startswith(TOKEN) and text.endswith("\u2026")


@given(st.lists(st.text(max_size=300), max_size=8), st.integers(min_value=1, max_value=600))
def test_never_longer_than_the_limit(messages: list[str], limit: int) -> None:
    assert len(failure_message(messages, limit)) <= limit


def test_a_status_record_leaves_out_its_defaults_and_reads_back_whole() -> None:
    pending = NodeRequestStatus(id="nodes/c/request/000001-abcd", group="general", pods={"k": 3})
    data = json.loads(pending.model_dump_json())
    assert set(data) == {"id", "group", "pods"}  # phase Pending, no node, no attempts: not written
    assert NodeRequestStatus.model_validate_json(pending.model_dump_json()) == pending

    ready = pending.model_copy(
        update={
            "phase": RequestPhase.READY,
            "node_name": "n1",
            "attempts": [Attempt(pool="p", result=AttemptResult.READY, timestamp=datetime.now(UTC))],
        }
    )
    data = json.loads(ready.model_dump_json())
    assert data["phase"] == "Ready" and data["node_name"] == "n1" and len(data["attempts"]) == 1
    assert NodeRequestStatus.model_validate_json(ready.model_dump_json()) == ready
    # What the Temporal converter writes for a signal or the carried state is the same JSON.
    payload = pydantic_data_converter.payload_converter.to_payloads([pending])[0]
    assert json.loads(payload.data) == json.loads(pending.model_dump_json())
