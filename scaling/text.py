"""Text kept within a bound: messages that workflow state and status queries carry."""

from __future__ import annotations

from datetime import UTC, datetime


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def when(ts: float | datetime | None) -> str:
    """A time (epoch seconds or datetime) as UTC text; "-" for none."""
    if ts is None:
        return "-"
    dt = ts if isinstance(ts, datetime) else datetime.fromtimestamp(ts, UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
