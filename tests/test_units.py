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
