"""Reading the worker's Prometheus endpoint: the demo's summary and the end-to-end tests."""

from __future__ import annotations

import re
import urllib.request
from collections import defaultdict

# name{label="value",...} value   (the text exposition format; timestamps are not used here)
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Sample = tuple[str, dict[str, str], float]


def parse(text: str) -> list[Sample]:
    samples: list[Sample] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        name, labels, value = m.groups()
        samples.append((name, dict(_LABEL.findall(labels or "")), float(value)))
    return samples


def fetch(url: str, timeout: float = 10.0) -> list[Sample]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return parse(resp.read().decode())


def totals(samples: list[Sample], prefix: str = "growth_") -> dict[str, float]:
    """One value per metric name, summed over its label sets (a histogram's _sum and _count too,
    never its buckets); whole numbers as ints, so they compare with counts."""
    out: dict[str, float] = defaultdict(float)
    for name, _labels, value in samples:
        if name.startswith(prefix) and not name.endswith("_bucket"):
            out[name] += value
    return {k: int(v) if float(v).is_integer() else round(v, 3) for k, v in sorted(out.items())}


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum of `name` over the samples whose labels include `labels` (0 when none)."""
    return sum(v for n, ls, v in samples if n == name and all(ls.get(k) == want for k, want in labels.items()))
