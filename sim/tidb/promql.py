"""The slice of PromQL the fake Prometheus answers, evaluated over an in-memory series set.

Supported: instant selectors with label matchers (`=`, `!=`, `=~`, `!~`), `increase`, `rate`
and `irate` over a range selector, the aggregations sum/avg/min/max/count with `by (...)` or
`without (...)` before or after the argument, and number literals. That covers PD's
autoscaling queries (`sum(increase(tikv_thread_cpu_seconds_total[60s])) by (instance,
kubernetes_namespace)`, the bare quota gauges) and per-instance storage gauges. Anything else
is refused with Prometheus's `bad_data` error, so a client relying on more finds out at once.

Counters carry their per-second rate, which the load model holds constant over the window:
`increase(x[w])` is rate * w (no extrapolation, no history).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

AGGREGATIONS = ("sum", "avg", "min", "max", "count")
RANGE_FUNCTIONS = ("increase", "rate", "irate")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<duration>\d+(?:ms|[smhdwy]))(?=\s*\])
  | (?P<number>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op>=~|!~|!=|=)
  | (?P<punct>[(){}\[\],])
""",
    re.VERBOSE,
)


class PromQLError(ValueError):
    """A query outside the supported slice, or malformed (Prometheus answers bad_data)."""


@dataclass
class Series:
    """One time series: labels (with __name__), its current value and, for a counter, its rate."""

    labels: dict[str, str]
    value: float
    rate: float | None = None  # per second, for a counter; None for a gauge


@dataclass
class Sample:
    labels: dict[str, str]
    value: float


@dataclass
class _Selector:
    name: str | None
    matchers: list[tuple[str, str, str]] = field(default_factory=list)
    range_s: float | None = None


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise PromQLError(f"unexpected character {text[pos]!r} at position {pos}")
        pos = m.end()
        kind = m.lastgroup or ""
        if kind != "ws":
            out.append((kind, m.group()))
    return out


def _unquote(token: str) -> str:
    body = token[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def parse_duration(text: str) -> float:
    m = re.fullmatch(r"(\d+)(ms|[smhdwy])", text)
    if not m:
        raise PromQLError(f"invalid duration {text!r}")
    return int(m.group(1)) * _DURATION_UNITS[m.group(2)]


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, offset: int = 0) -> tuple[str, str]:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else ("eof", "")

    def take(self, kind: str, value: str | None = None) -> str:
        tok = self.peek()
        if tok[0] != kind or (value is not None and tok[1] != value):
            want = value or kind
            raise PromQLError(f"expected {want!r}, got {tok[1] or 'end of query'!r}")
        self.i += 1
        return tok[1]

    def parse(self) -> object:
        node = self.expr()
        if self.peek()[0] != "eof":
            raise PromQLError(f"unexpected {self.peek()[1]!r}: binary operators are not supported")
        return node

    def expr(self) -> object:
        kind, value = self.peek()
        if kind == "number":
            self.i += 1
            return float(value)
        if kind == "ident" and value in AGGREGATIONS and self.peek(1)[1] in ("(", "by", "without"):
            return self.aggregate()
        if kind == "ident" and value in RANGE_FUNCTIONS and self.peek(1)[1] == "(":
            self.i += 1
            self.take("punct", "(")
            sel = self.selector()
            if sel.range_s is None:
                raise PromQLError(f"{value}() needs a range vector, e.g. {value}(x[1m])")
            self.take("punct", ")")
            return (value, sel)
        if kind == "ident" and self.peek(1)[1] == "(":
            raise PromQLError(f"function {value}() is not supported by the sim")
        sel = self.selector()
        if sel.range_s is not None:
            raise PromQLError("a range vector cannot be the result of an instant query here")
        return sel

    def grouping(self) -> tuple[str, list[str]] | None:
        kind, value = self.peek()
        if kind == "ident" and value in ("by", "without"):
            self.i += 1
            self.take("punct", "(")
            labels: list[str] = []
            while self.peek()[1] != ")":
                labels.append(self.take("ident"))
                if self.peek()[1] == ",":
                    self.i += 1
            self.take("punct", ")")
            return value, labels
        return None

    def aggregate(self) -> object:
        op = self.take("ident")
        group = self.grouping()
        self.take("punct", "(")
        arg = self.expr()
        self.take("punct", ")")
        after = self.grouping()
        if group and after:
            raise PromQLError("grouping given twice")
        return ("agg", op, group or after, arg)

    def selector(self) -> _Selector:
        sel = _Selector(name=None)
        if self.peek()[0] == "ident":
            sel.name = self.take("ident")
        if self.peek()[1] == "{":
            self.i += 1
            while self.peek()[1] != "}":
                label = self.take("ident")
                op = self.take("op")
                value = _unquote(self.take("string"))
                if op in ("=~", "!~"):
                    try:
                        re.compile(value)
                    except re.error as exc:
                        raise PromQLError(f"invalid regular expression {value!r}: {exc}") from None
                sel.matchers.append((label, op, value))
                if self.peek()[1] == ",":
                    self.i += 1
            self.take("punct", "}")
        if sel.name is None and not sel.matchers:
            raise PromQLError(f"unexpected {self.peek()[1] or 'end of query'!r}")
        if self.peek()[1] == "[":
            self.i += 1
            sel.range_s = parse_duration(self.take("duration"))
            self.take("punct", "]")
        return sel


def _matches(sel: _Selector, labels: dict[str, str]) -> bool:
    if sel.name is not None and labels.get("__name__") != sel.name:
        return False
    for label, op, want in sel.matchers:
        have = labels.get(label, "")
        if op == "=" and have != want or op == "!=" and have == want:
            return False
        if op in ("=~", "!~"):
            hit = re.fullmatch(want, have) is not None
            if hit != (op == "=~"):
                return False
    return True


def _without_name(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k != "__name__"}


def _eval(node: object, series: list[Series]) -> list[Sample] | float:
    if isinstance(node, float):
        return node
    if isinstance(node, _Selector):
        return [Sample(dict(s.labels), s.value) for s in series if _matches(node, s.labels)]
    assert isinstance(node, tuple)
    if node[0] in RANGE_FUNCTIONS:
        func, sel = node
        out = []
        for s in series:
            if not _matches(sel, s.labels):
                continue
            rate = s.rate or 0.0  # a gauge is constant here: it has not moved over the window
            out.append(Sample(_without_name(s.labels), rate * sel.range_s if func == "increase" else rate))
        return out
    _, op, group, arg = node
    inner = _eval(arg, series)
    if isinstance(inner, float):
        raise PromQLError(f"{op}() needs an instant vector, got a scalar")
    groups: dict[tuple[tuple[str, str], ...], list[float]] = {}
    for sample in inner:
        if group is None:
            key: dict[str, str] = {}
        elif group[0] == "by":
            key = {k: sample.labels[k] for k in group[1] if k in sample.labels}
        else:
            key = {k: v for k, v in _without_name(sample.labels).items() if k not in group[1]}
        groups.setdefault(tuple(sorted(key.items())), []).append(sample.value)
    reduce = {"sum": sum, "min": min, "max": max, "count": len, "avg": lambda vs: sum(vs) / len(vs)}[op]
    return [Sample(dict(k), float(reduce(vs))) for k, vs in sorted(groups.items())]


def evaluate(query: str, series: list[Series]) -> list[Sample] | float:
    """A vector (list of samples) or a scalar; raises PromQLError for unsupported queries."""
    if not query.strip():
        raise PromQLError("empty query")
    return _eval(_Parser(query).parse(), series)


def format_value(value: float) -> str:
    """Sample values as Prometheus writes them (Go's strconv 'f', -1; NaN and ±Inf by name)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    return repr(value)
