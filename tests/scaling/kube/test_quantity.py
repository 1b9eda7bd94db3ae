from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaling.kube.quantity import cpu_millis, format_cpu, format_memory, memory_bytes, parse_quantity

BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {
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


@pytest.mark.parametrize(
    "text,value",
    [
        ("1", Decimal(1)),
        ("250m", Decimal("0.25")),
        ("1.5", Decimal("1.5")),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1E", Decimal(10**18)),
        ("2e-3", Decimal("0.002")),
        ("-1k", Decimal(-1000)),
        ("+5Mi", Decimal(5 * 2**20)),
        (".5", Decimal("0.5")),
        ("100u", Decimal("0.0001")),
        ("7n", Decimal("7e-9")),
    ],
)
def test_parse_quantity_examples(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "1.5.5", "1KB", "Mi", "1 Gi", " 1", "1e", "1ki", "--1"])
def test_parse_quantity_rejects_and_names_the_string(bad: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_quantity(bad)
    assert repr(bad) in str(e.value)


@pytest.mark.parametrize(
    "bad",
    [
        "\u0661\u0662",  # Arabic-Indic "12": Python's \\d and Decimal both accept it
        "\uff11",  # fullwidth "1"
        "\uff11Gi",
        "1\u0660\u0660m",  # ASCII first digit, Arabic-Indic rest
        "1.\u0665",
        "1e\u0663",  # the exponent too
        "\u0967\u0966Mi",  # Devanagari "10"
    ],
)
def test_parse_quantity_accepts_ascii_digits_only(bad: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_quantity(bad)
    assert repr(bad) in str(e.value)
    with pytest.raises(ValueError):
        cpu_millis(bad)
    with pytest.raises(ValueError):
        memory_bytes(bad)


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_json_numbers_are_rejected(bad: float) -> None:
    with pytest.raises(ValueError) as e:
        parse_quantity(bad)
    assert repr(bad) in str(e.value)


def test_json_numbers_are_accepted_and_booleans_are_not() -> None:
    assert parse_quantity(2) == 2
    assert parse_quantity(0.5) == Decimal("0.5")
    with pytest.raises(ValueError):
        parse_quantity(True)


def test_cpu_rounds_up_to_whole_millicores() -> None:
    assert cpu_millis("0.0001") == 1
    assert cpu_millis("100m") == cpu_millis("0.1") == 100
    assert cpu_millis("2") == 2000
    assert cpu_millis("1500u") == 2


def test_memory_rounds_up_to_whole_bytes() -> None:
    assert memory_bytes("1Ki") == 1024
    assert memory_bytes("1.5k") == 1500
    assert memory_bytes("1500m") == 2
    assert memory_bytes("128974848") == 128974848


@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from(sorted(BINARY)))
def test_binary_suffix_round_trip(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") == n * BINARY[suffix]


@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from(sorted(DECIMAL)))
def test_decimal_suffix_round_trip(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") == n * DECIMAL[suffix]


@given(st.decimals(allow_nan=False, allow_infinity=False, places=6, min_value=-(10**9), max_value=10**9))
def test_plain_decimals_are_exact(d: Decimal) -> None:
    assert parse_quantity(format(d, "f")) == d


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=-6, max_value=6))
def test_exponent_form_matches_scaled_integer(n: int, exp: int) -> None:
    assert parse_quantity(f"{n}e{exp}") == Decimal(n).scaleb(exp)


@given(st.integers(min_value=0, max_value=10**9))
def test_cpu_format_round_trip(m: int) -> None:
    assert cpu_millis(format_cpu(m)) == m


@given(st.integers(min_value=0, max_value=2**62))
def test_memory_format_round_trip(n: int) -> None:
    assert memory_bytes(format_memory(n)) == n


def test_format_picks_the_readable_form() -> None:
    assert format_cpu(4000) == "4"
    assert format_cpu(250) == "250m"
    assert format_memory(8 * 2**30) == "8Gi"
    assert format_memory(1000) == "1000"
