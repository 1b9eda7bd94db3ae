"""auto-<hash> names: FNV-1 32-bit over Go-style JSON, through SafeEncodeString's alphabet.

The expected values are computed here independently (a second FNV-1, json.dumps with Go's
escapes) and pinned to published FNV-1 reference values."""

from __future__ import annotations

import json

import pytest

from scaling.components.naming import auto_cluster_name, fnv1_32, go_json, safe_encode, unscaled


def reference_fnv1(data: bytes) -> int:
    h = 2166136261
    for b in data:
        h = (h * 16777619) % 2**32
        h = h ^ b
    return h


def reference_name(seed: dict) -> str:
    text = json.dumps(seed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    digits = str(reference_fnv1(text.encode()))
    return "auto-" + "".join("bcdfghjklmnpqrstvwxz2456789"[ord(d) % 27] for d in digits)


@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"", 0x811C9DC5), (b"a", 0x050C5D7E), (b"foobar", 0x31F0B262)],  # FNV-1 32 reference values
)
def test_fnv1_reference_values(data: bytes, expected: int) -> None:
    assert fnv1_32(data) == expected
    assert reference_fnv1(data) == expected


def test_fnv1_is_not_fnv1a() -> None:
    assert fnv1_32(b"a") != 0xE40C292C  # FNV-1a of "a"


def test_safe_encode_maps_digits_through_the_alphabet() -> None:
    # '0' is 48 and 48 % 27 = 21 -> '4'; '6' is 54 % 27 = 0 -> 'b'.
    assert safe_encode("0123456789") == "456789bcdf"


def test_go_json_is_compact_sorted_and_html_escaped() -> None:
    assert go_json({"b": 1, "a": {"z": "<&>", "y": ""}, "n": None}) == (
        '{"a":{"y":"","z":"\\u003c\\u0026\\u003e"},"b":1,"n":null}'
    )
    assert go_json({"k": 'q"\\\n\u2028é'}) == '{"k":"q\\"\\\\\\n\\u2028é"}'


@pytest.mark.parametrize(
    ("quantity", "expected"),
    [("1", 1), ("8Gi", 8589934592), ("100Gi", 107374182400), ("500m", 500), ("0.5", 5), ("", 0), ("2000m", 2000)],
)
def test_unscaled_quantities_as_go_keeps_them(quantity: str, expected: int) -> None:
    assert unscaled(quantity) == expected


def test_seed_example_name() -> None:
    labels = {"group": "a", "specialUse": "hotRegion", "zone": "A"}
    seed = {
        "namespace": "prod",
        "tas": "auto",
        "component": "tikv",
        "cpu": 1,
        "memory": 8589934592,
        "storage": 107374182400,
        "labels": labels,
    }
    name = auto_cluster_name("prod", "auto", "tikv", "1", "8Gi", "100Gi", labels)
    assert name == reference_name(seed)
    assert name.startswith("auto-") and set(name[5:]) <= set("456789bcdf")


def test_name_depends_on_every_seed_field() -> None:
    base = ("ns", "tas", "tikv", "1", "8Gi", "100Gi", {"group": "a"})
    names = {auto_cluster_name(*base)}
    for i, other in enumerate(["ns2", "tas2", "tidb", "2", "16Gi", "200Gi", {"group": "b"}]):
        variant = list(base)
        variant[i] = other
        names.add(auto_cluster_name(*variant))
    assert len(names) == 8


def test_label_escapes_reach_the_hash() -> None:
    labels = {"zone": "a&b"}
    seed = {
        "namespace": "ns",
        "tas": "t",
        "component": "tidb",
        "cpu": 2,
        "memory": 4294967296,
        "storage": 0,
        "labels": labels,
    }
    assert auto_cluster_name("ns", "t", "tidb", "2", "4Gi", "", labels) == reference_name(seed)
