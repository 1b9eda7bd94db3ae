"""Hetzner server type JSON → ServerType, usability, and error code → decision."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from scaling.kube.models import Resources
from scaling.nodes.providers.hetzner import ErrorDecision, decide_error, server_type_from_api, unusable_reason

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GIB = 1024**3


def st_json(name: str = "cx32", arch: str = "x86", **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "cores": 4,
        "memory": 8.0,
        "disk": 80,
        "architecture": arch,
        "deprecation": None,
        "prices": [
            {"location": "fsn1", "price_hourly": {"net": "0.0104000000", "gross": "0.0123760000"}},
            {"location": "hel1", "price_hourly": {"net": "0.0200000000", "gross": "0.0238000000"}},
        ],
        "locations": [
            {"name": "fsn1", "deprecation": None, "available": True},
            {"name": "hel1", "deprecation": None, "available": True},
        ],
    }
    data.update(extra)
    return data


def test_conversion() -> None:
    reserve = Resources(cpu_m=200, memory=GIB // 2)
    st = server_type_from_api(st_json("CX32"), ["hel1", "fsn1"], reserve, max_pods=110)
    assert st.name == "cx32" and st.provider == "hetzner" and st.arch == "amd64"
    # The disk (80 GB) is the node's ephemeral-storage; Hetzner Cloud types offer no extended resources.
    assert st.allocatable == Resources(
        cpu_m=3800, memory=8 * GIB - GIB // 2, pods=110, extended=(("ephemeral-storage", 80 * 10**9),)
    )
    assert st.price_hourly == pytest.approx(0.02)  # first configured location's price
    assert server_type_from_api(st_json(arch="arm"), ["fsn1"], Resources()).arch == "arm64"
    tiny = server_type_from_api(st_json(cores=1, memory=0.5), ["fsn1"], Resources(cpu_m=2000, memory=GIB))
    assert tiny.allocatable.cpu_m == 0 and tiny.allocatable.memory == 0


def test_unusable_reasons() -> None:
    assert unusable_reason(None, ["fsn1"], NOW) is not None
    assert unusable_reason(st_json(), ["fsn1"], NOW) is None
    assert "not offered in" in str(unusable_reason(st_json(), ["ash"], NOW))
    gone = {"announced": "2025-01-01T00:00:00Z", "unavailable_after": "2025-06-01T00:00:00Z"}
    soon = {"announced": "2025-01-01T00:00:00Z", "unavailable_after": "2026-06-01T00:00:00Z"}
    dep_gone = st_json(locations=[{"name": "fsn1", "deprecation": gone, "available": True}])
    assert "unavailable since" in str(unusable_reason(dep_gone, ["fsn1"], NOW, allow_deprecated=True))
    dep_soon = st_json(locations=[{"name": "fsn1", "deprecation": soon, "available": True}])
    assert "deprecated" in str(unusable_reason(dep_soon, ["fsn1"], NOW))
    assert unusable_reason(dep_soon, ["fsn1"], NOW, allow_deprecated=True) is None
    # Deprecated in one configured location only: still usable through the other.
    mixed = st_json(
        locations=[
            {"name": "fsn1", "deprecation": gone, "available": True},
            {"name": "hel1", "deprecation": None, "available": True},
        ]
    )
    assert unusable_reason(mixed, ["fsn1", "hel1"], NOW) is None
    # Type-level deprecation (older API shape, no per-location list).
    legacy = st_json(locations=[], deprecation=gone)
    assert unusable_reason(legacy, ["fsn1"], NOW) is not None
    unavailable = st_json(locations=[{"name": "fsn1", "deprecation": None, "available": False}])
    assert "not available" in str(unusable_reason(unavailable, ["fsn1"], NOW))


@pytest.mark.parametrize(
    ("code", "decision"),
    [
        ("resource_unavailable", ErrorDecision.NEXT_LOCATION),
        ("placement_error", ErrorDecision.NEXT_LOCATION),
        ("resource_limit_exceeded", ErrorDecision.QUOTA_EXCEEDED),
        ("rate_limit_exceeded", ErrorDecision.RATE_LIMITED),
        ("unauthorized", ErrorDecision.INVALID_TOKEN),
        (401, ErrorDecision.INVALID_TOKEN),
        ("token_readonly", ErrorDecision.FORBIDDEN),
        ("uniqueness_error", ErrorDecision.ALREADY_EXISTS),
        ("server_error", ErrorDecision.RETRY),
        (502, ErrorDecision.RETRY),
        ("invalid_input", ErrorDecision.INVALID_REQUEST),
        ("something_new", ErrorDecision.INVALID_REQUEST),
    ],
)
def test_error_decisions(code: str | int, decision: ErrorDecision) -> None:
    assert decide_error(code) is decision
