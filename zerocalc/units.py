"""Units at the edge: parsing human counts ("7.5B", "1T") and formatting bytes.

Inside zerocalc everything is bytes, seconds and bytes/second; this module is where
text from a user becomes a number and a number becomes text for a user.
GB means 1e9 bytes and GiB 2**30 bytes; zerocalc never leaves it ambiguous.
"""

from __future__ import annotations

import math
import re

from zerocalc.errors import ConfigError

_COUNT_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_COUNT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMBGTkmbgt]?)\s*$")


def parse_count(text: str | int | float, option: str = "--psi") -> int:
    """Parse a parameter count: ``7.5e9``, ``7500000000``, ``7.5B``, ``175B``, ``1T``, ``350M``.

    Returns a positive integer; raises :class:`ConfigError` naming ``option`` otherwise.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _COUNT_RE.match(str(text))
        if not m:
            raise ConfigError(
                f"{text!r} is not a count; write e.g. 7.5e9, 7.5B, 175B or 1T", option=option
            )
        value = float(m.group(1)) * _COUNT_SUFFIX[m.group(2).upper()]
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"must be a positive number, got {text!r}", option=option)
    rounded = round(value)
    if rounded < 1:
        raise ConfigError(f"must be at least 1, got {text!r}", option=option)
    return int(rounded)


def format_bytes(n: float, base: int = 1000) -> str:
    """``format_bytes(1.5e9) == '1.50 GB'``; ``base=1024`` gives KiB/MiB/GiB."""
    units = ["B", "KB", "MB", "GB", "TB", "PB"] if base == 1000 else ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    value = float(n)
    for unit in units:
        if abs(value) < base or unit == units[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= base
    raise AssertionError("unreachable")


def format_seconds(t: float) -> str:
    """Seconds as text with a unit that keeps three significant digits (µs, ms, s)."""
    if t != t:  # NaN
        return "n/a"
    if abs(t) < 1e-3:
        return f"{t * 1e6:.3g} µs"
    if abs(t) < 1:
        return f"{t * 1e3:.3g} ms"
    return f"{t:.3g} s"
