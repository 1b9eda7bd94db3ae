"""Text kept within a bound: messages that workflow state and status queries carry."""

from __future__ import annotations

from datetime import UTC, datetime


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Free text an operator sends to a loop (an approval's note, a node's or request's name): kept
# in the workflow's state and history, so bounded; a longer one is refused naming the field.
MAX_UPDATE_TEXT = 1024


def too_long(field: str, value: str, limit: int = MAX_UPDATE_TEXT) -> str:
    """Why `value` is refused for `field` ("" when it fits)."""
    return f"{field}: {len(value)} characters; at most {limit}" if len(value) > limit else ""


def when(ts: float | datetime | None) -> str:
    """A time (epoch seconds or datetime) as UTC text; "-" for none."""
    if ts is None:
        return "-"
    dt = ts if isinstance(ts, datetime) else datetime.fromtimestamp(ts, UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
