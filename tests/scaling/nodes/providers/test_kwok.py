"""The KWOK provider's bundled server types."""

from __future__ import annotations

from scaling.nodes.providers.kwok import kwok_catalogue


def test_catalogue_has_the_required_names_and_arm_types() -> None:
    names = {t.name for t in kwok_catalogue()}
    required = {"cx22", "cx32", "cx42", "cx52", "cx31", "cx33", "ccx13", "ccx23", "ccx33"}
    required |= {f"cpx{n}1" for n in range(1, 6)} | {f"cax{n}1" for n in range(1, 5)}
    assert required <= names
    arches = {t.name: t.arch for t in kwok_catalogue()}
    assert all(arches[f"cax{n}1"] == "arm64" for n in range(1, 5))
    assert arches["cx32"] == "amd64"
