"""Kubernetes resource quantities ("500m", "2Gi", "1e3") for the simulated cluster.

sim/ keeps its own parser on purpose: it stands for the outside world and must not share
code with the product it tests.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}


def parse(value: str | int | float) -> Decimal:
    """Exact value of a quantity in base units; raises ValueError when malformed."""
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    text = value.strip()
    if not text:
        raise ValueError("empty quantity")
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            return _number(text[: -len(suffix)], value) * factor
    if text[-1] in _DECIMAL and not text[-1].isdigit() and text[-1] not in "eE":
        return _number(text[:-1], value) * _DECIMAL[text[-1]]
    # "E" alone is exa; "1e3" is an exponent, which Decimal parses itself.
    if text.endswith("E") and text[:-1].replace(".", "", 1).lstrip("+-").isdigit():
        return _number(text[:-1], value) * _DECIMAL["E"]
    return _number(text, value)


def _number(text: str, original: object) -> Decimal:
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"invalid quantity {original!r}") from None
    if not number.is_finite():
        raise ValueError(f"invalid quantity {original!r}")
    return number


def millis(value: str | int | float) -> int:
    """CPU in millicores, rounded up like the apiserver does for sub-milli precision."""
    return int(math.ceil(parse(value) * 1000))


def units(value: str | int | float) -> int:
    """Bytes, pod counts and other integral resources, rounded up."""
    return int(math.ceil(parse(value)))
