"""ReprMemo: built once per distinct data while kept, and bounded."""

from __future__ import annotations

from scaling.kube.memo import ReprMemo


def test_equal_data_is_built_once_and_the_cache_starts_over_when_full() -> None:
    built: list[object] = []

    def build(parts: object) -> object:
        built.append(parts)
        return object()

    memo: ReprMemo[object] = ReprMemo(2)
    first = memo.get({"cpu": 1, "tolerations": []}, lambda: build("a"))
    assert memo.get({"cpu": 1, "tolerations": []}, lambda: build("again")) is first  # an equal copy
    assert memo.get({"cpu": 2}, lambda: build("b")) is not first
    assert built == ["a", "b"]
    memo.get({"cpu": 3}, lambda: build("c"))  # full: starts over
    assert memo.get({"cpu": 1, "tolerations": []}, lambda: build("a2")) is not first
    assert built == ["a", "b", "c", "a2"]
