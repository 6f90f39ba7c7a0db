import pytest

from zerocalc.errors import ConfigError
from zerocalc.units import format_bytes, parse_count


@pytest.mark.parametrize(
    ("text", "expected"),
    [("7.5e9", 7_500_000_000), ("7.5B", 7_500_000_000), ("175B", 175_000_000_000),
     ("1T", 1_000_000_000_000), ("350M", 350_000_000), ("377856", 377_856), (25557032, 25_557_032)],
)
def test_parse_count(text, expected):
    assert parse_count(text) == expected


@pytest.mark.parametrize("text", ["-3", "banana", "0", "", "1e400", "nan", "7.5X"])
def test_parse_count_rejects(text):
    with pytest.raises(ConfigError, match="--psi"):
        parse_count(text)


def test_format_bytes():
    assert format_bytes(1.5e9) == "1.50 GB"
    assert format_bytes(2**30, base=1024) == "1.00 GiB"
    assert format_bytes(12) == "12 B"


@pytest.mark.parametrize(
    ("text", "expected"),
    # thousands separators as zerocalc prints Ψ ("25,557,032") and as Python groups digits
    [("25,557,032", 25_557_032), ("25_557_032", 25_557_032), ("1,000", 1000),
     # read exactly, not through a float: 1.234567 × 10^9
     ("1.234567B", 1_234_567_000), ("25.5M", 25_500_000)],
)
def test_parse_count_separators_and_exact_decimals(text, expected):
    assert parse_count(text) == expected


def test_parse_count_refuses_exponent_with_suffix():
    # "7.5e9B" used to be read as 7.5e9 × 1e9 = 7.5e18; it is ambiguous, so it is refused
    with pytest.raises(ConfigError, match=r"--psi: .*both an exponent and a suffix"):
        parse_count("7.5e9B")


@pytest.mark.parametrize("text", ["1.5", 1.5, "2.5K1", "0.5"])
def test_parse_count_refuses_non_whole_counts(text):
    # a parameter count is a whole number: 1.5 used to be rounded silently to 2
    with pytest.raises(ConfigError, match="--psi"):
        parse_count(text)


def test_parse_count_non_whole_message():
    with pytest.raises(ConfigError, match="whole number"):
        parse_count("1.5")


@pytest.mark.parametrize("text", ["25,55,032", "25,557032", "25__557", "1,5B"])
def test_parse_count_refuses_misplaced_separators(text):
    with pytest.raises(ConfigError, match="--psi"):
        parse_count(text)


def test_format_diff_hides_rounding_noise_but_not_zero_or_real_differences():
    from zerocalc.units import format_diff

    # float64 noise after a few steps: 1e-16 on one BLAS build, 5e-16 on another, the same text
    assert format_diff(1.9e-16) == format_diff(5.1e-16) == "< 1e-12"
    assert format_diff(-3e-15) == "< 1e-12"
    assert format_diff(0.0) == "0.0e+00" and format_diff(0.0, 2) == "0.00e+00"
    assert format_diff(2.15e-1) == "2.1e-01" and format_diff(2.15e-1, 2) == "2.15e-01"
    assert format_diff(1e-12) == "1.0e-12"  # the floor itself is shown
    assert format_diff(None) == format_diff(float("nan")) == "n/a"
