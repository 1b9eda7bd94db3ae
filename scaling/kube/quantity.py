"""Kubernetes resource quantities ("250m", "1.5Gi", "1e3") parsed exactly.

Decimal arithmetic keeps "0.1" and "100m" equal; floats would not. Rounding follows the API
server: a quantity converted to an integer unit rounds up (a pod asking 0.5 bytes needs 1).
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Context, Decimal, InvalidOperation

# Wide enough for Ei values with fractional digits; the default 28 digits is not.
_CTX = Context(prec=80)

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

# The exponent alternative comes first so "1E3" is 1000 while a bare "1E" is one exa.
# ASCII digits only: Python's \d and Decimal also take other scripts' digits ("١٢", "１"),
# which the API server rejects.
_QUANTITY = re.compile(
    r"(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?",
    re.ASCII,
)


def parse_quantity(s: str | int | float) -> Decimal:
    """The exact value of a Kubernetes quantity; ValueError naming the string if malformed."""
    if isinstance(s, bool):
        raise ValueError(f"invalid quantity {s!r}: a boolean is not a quantity")
    if isinstance(s, int):
        return Decimal(s)
    if isinstance(s, float):
        if not math.isfinite(s):
            raise ValueError(f"invalid quantity {s!r}: not a finite number")
        # JSON numbers arrive as floats; their shortest repr is what the user wrote.
        return Decimal(repr(s))
    if not isinstance(s, str):
        raise ValueError(f"invalid quantity {s!r}: expected a string")
    m = _QUANTITY.fullmatch(s)
    if m is None:
        raise ValueError(f"invalid quantity {s!r}")
    try:
        num = Decimal(m.group("num"))
    except InvalidOperation as e:  # pragma: no cover - the regex admits only valid numbers
        raise ValueError(f"invalid quantity {s!r}") from e
    if m.group("exp") is not None:
        exp = int(m.group("exp")[1:])
        if abs(exp) > 1000:
            raise ValueError(f"invalid quantity {s!r}: exponent out of range")
        return num.scaleb(exp, _CTX)
    suffix = m.group("suffix") or ""
    if suffix in _BINARY:
        return _CTX.multiply(num, Decimal(1024 ** _BINARY[suffix]))
    return num.scaleb(_DECIMAL[suffix], _CTX)


def _ceil(d: Decimal) -> int:
    return int(d.to_integral_value(rounding=ROUND_CEILING))


def cpu_millis(s: str | int | float) -> int:
    """CPU in whole millicores, rounded up ("0.0001" -> 1)."""
    return _ceil(_CTX.multiply(parse_quantity(s), Decimal(1000)))


def memory_bytes(s: str | int | float) -> int:
    """Memory (or any count) in whole units, rounded up."""
    return _ceil(parse_quantity(s))


def format_cpu(millis: int) -> str:
    """Canonical text for a cpu amount: whole cores when exact ("4"), else millicores ("250m")."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_memory(n: int) -> str:
    """Canonical text for bytes: the largest binary suffix that divides exactly ("8Gi")."""
    if n == 0:
        return "0"
    for suffix, power in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
        unit = 1024**power
        if n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)
