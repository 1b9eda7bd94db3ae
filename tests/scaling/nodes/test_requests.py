"""A NodeRequest attempt's failure message (scaling.nodes.requests.failure_message)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scaling.nodes.requests import ATTEMPT_MESSAGE_MAX, failure_message

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
