"""The name of a heterogeneous TidbCluster: `auto-<hash>`, as tidb-operator names it.

The seed {namespace, tas, component, cpu, memory, storage, labels} is marshalled the way Go's
json.Marshal marshals a map[string]interface{} (keys sorted, no spaces, <, >, & and U+2028/9
escaped), hashed with 32-bit FNV-1 (not 1a), and the hash's decimal digits are mapped through
Kubernetes' SafeEncodeString alphabet (each character -> alphabet[ord(c) % 27]).

cpu, memory and storage are the quantity's *unscaled* integer, as the operator takes it
(Quantity.AsDec().UnscaledBig()): "1" -> 1, "8Gi" -> 8589934592, but "500m" -> 500 and
"0.5" -> 5. That is the released behaviour; matching it means an object tidb-operator created
is found again under the same name.
"""

from __future__ import annotations

import re
from decimal import Decimal

from scaling.kube.quantity import parse_quantity

AUTO_PREFIX = "auto-"
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
FNV32_OFFSET = 0x811C9DC5
FNV32_PRIME = 0x01000193

_BINARY_EXP = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QTY = re.compile(
    r"(?P<sign>[+-]?)(?P<int>\d*)(?:\.(?P<frac>\d*))?"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?"
)


def fnv1_32(data: bytes) -> int:
    """FNV-1: multiply, then xor (FNV-1a does the reverse)."""
    h = FNV32_OFFSET
    for byte in data:
        h = (h * FNV32_PRIME) & 0xFFFFFFFF
        h ^= byte
    return h


def safe_encode(text: str) -> str:
    return "".join(SAFE_ALPHABET[ord(c) % len(SAFE_ALPHABET)] for c in text)


def _go_string(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif o < 0x20 or ch in "<>&\u2028\u2029":
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_json(value: object) -> str:
    """Compact JSON as Go's encoding/json writes maps of strings, ints and nested maps."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-8"))
        return "{" + ",".join(f"{_go_string(k)}:{go_json(v)}" for k, v in items) + "}"
    raise TypeError(f"go_json: unsupported {type(value).__name__}")


def unscaled(quantity: str) -> int:
    """A quantity's unscaled integer as resource.Quantity keeps it after ParseQuantity.

    The integer and fraction digits joined ("1.5" -> 15, "500m" -> 500); a binary suffix
    multiplies out ("8Gi" -> 8 << 30). An empty quantity is 0. Values outside Go's fast path
    (fractional binary amounts, more than 18 digits) are kept by Go as an inf.Dec rounded to
    nano scale; we give the value times 10^9 for those, which is what that rounding produces."""
    text = quantity.strip()
    if not text:
        return 0
    m = _QTY.fullmatch(text)
    if m is None or not (m.group("int") or m.group("frac")):
        raise ValueError(f"invalid quantity {quantity!r}")
    sign = -1 if m.group("sign") == "-" else 1
    num = (m.group("int") or "").lstrip("0")
    frac = m.group("frac") or ""
    digits = (num + frac).lstrip("0") or "0"
    suffix = m.group("suffix") or ""
    if suffix in _BINARY_EXP:
        if not frac and len(num) + _BINARY_EXP[suffix] * 3 // 10 < 15:
            return sign * (int(num or "0") << _BINARY_EXP[suffix])
        return sign * _nano(text)
    exponent = int(m.group("exp")[1:]) if m.group("exp") else _DECIMAL_EXP[suffix]
    if len(num) + len(frac) > 18 or exponent - len(frac) < -9:
        return sign * _nano(text)
    return sign * int(digits)


def _nano(text: str) -> int:
    """Go's slow path: an inf.Dec rounded up to nano scale; its unscaled value."""
    value = abs(parse_quantity(text)) * Decimal(10**9)
    return int(value.to_integral_value(rounding="ROUND_CEILING"))


def auto_cluster_name(
    namespace: str,
    autoscaler: str,
    component: str,
    cpu: str,
    memory: str,
    storage: str,
    labels: dict[str, str] | None,
) -> str:
    """`auto-<hash>` for one group (labels None marshals as null, as a nil Go map does)."""
    seed = {
        "namespace": namespace,
        "tas": autoscaler,
        "component": component,
        "cpu": unscaled(cpu),
        "memory": unscaled(memory),
        "storage": unscaled(storage),
        "labels": labels,
    }
    return AUTO_PREFIX + safe_encode(str(fnv1_32(go_json(seed).encode("utf-8"))))
