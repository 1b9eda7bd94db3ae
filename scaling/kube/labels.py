"""Label values both Kubernetes and Hetzner accept, derived from ids that may not be valid
themselves (workflow ids hold '/')."""

from __future__ import annotations

import hashlib
import re

_LABEL_VALUE_MAX = 63
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_VALID = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?)?$")


def is_label_value(value: str) -> bool:
    """A value both Kubernetes and Hetzner accept as a label value."""
    return len(value) <= _LABEL_VALUE_MAX and bool(_VALID.match(value))


def label_value(raw: str) -> str:
    """A label-safe stand-in for `raw`: unchanged when already valid, else a readable prefix
    plus a hash of the original so distinct inputs stay distinct (workflow ids hold '/')."""
    if is_label_value(raw):
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
    prefix = _UNSAFE.sub("-", raw)[: _LABEL_VALUE_MAX - 11].strip("-_.")
    return f"{prefix}-{digest}" if prefix else digest


def request_key(request_id: str) -> str:
    """The label value a provider stores for a NodeRequest id."""
    return label_value(request_id)
