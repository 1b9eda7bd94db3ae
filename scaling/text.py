"""Text kept within a bound: messages that workflow state and status queries carry."""


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
