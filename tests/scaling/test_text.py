from scaling.text import shorten


def test_text_within_the_limit_is_kept_whole() -> None:
    assert shorten("abc", 3) == "abc"


def test_longer_text_is_cut_to_the_limit_with_an_ellipsis() -> None:
    out = shorten("abcdef", 4)
    assert out == "abc…" and len(out) == 4
