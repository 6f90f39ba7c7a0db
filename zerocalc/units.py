"""Units at the edge: parsing human counts ("7.5B", "1T") and formatting bytes.

Inside zerocalc everything is bytes, seconds and bytes/second; this module is where
text from a user becomes a number and a number becomes text for a user.
GB means 1e9 bytes and GiB 2**30 bytes; zerocalc never leaves it ambiguous.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from zerocalc.errors import ConfigError

_COUNT_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
# Digits with optional thousands separators: "25,557,032" (groups of three) or "25_557_032"
# (Python's digit grouping), then an optional fraction, then EITHER an exponent OR a suffix.
_COUNT_RE = re.compile(
    r"^\s*(?P<sign>[-+])?(?P<int>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+(?:_[0-9]+)*)?(?P<frac>\.[0-9]+)?"
    r"(?P<exp>[eE][+-]?[0-9]+)?\s*(?P<suffix>[KMBGTkmbgt]?)\s*$"
)
_COUNT_HINT = "write e.g. 7.5e9, 7.5B, 175B, 1T or 25,557,032"


def parse_number(text: str | int | float, option: str, *, whole: bool = False) -> int | float:
    """A number as every option reads it: ``64``, ``1e3``, ``1,024``, ``25_557_032``, ``1.5``, or with a
    count suffix (``8K``, ``7.5B``); ``whole`` refuses a fraction (``1.5`` is not a number of
    ranks), never rounds it. One parser for every numeric option, so ``--n 1e3`` reads as
    ``--psi 1e9`` does. Raises :class:`ConfigError` naming ``option``.
    """
    if isinstance(text, bool):
        raise ConfigError(f"{text!r} is not a number", option=option)
    if isinstance(text, int | float):
        value = Decimal(text) if math.isfinite(text) else None
    else:
        m = _COUNT_RE.match(str(text))
        if not m or (m["int"] is None and m["frac"] is None):
            hint = "write e.g. 64, 1e3 or 1,024" if whole else "write e.g. 12, 0.5, 1e-6 or 2.5e3"
            raise ConfigError(f"{text!r} is not a {'whole ' if whole else ''}number; {hint}", option=option)
        if m["exp"] and m["suffix"]:
            raise ConfigError(f"{text!r} has both an exponent and a suffix; write 7.5e9 or 7.5B, "
                              "not both", option=option)
        digits = (m["sign"] or "") + (m["int"] or "0").replace(",", "").replace("_", "") + (
            m["frac"] or "") + (m["exp"] or "")
        value = Decimal(digits) * _COUNT_SUFFIX[m["suffix"].upper()]
    if value is None or not value.is_finite() or not math.isfinite(float(value)):
        raise ConfigError(f"must be a finite number, got {text!r}", option=option)
    if whole:
        if value != value.to_integral_value():
            raise ConfigError(f"must be a whole number, got {text!r}", option=option)
        return int(value)
    return float(value)


def parse_count(text: str | int | float, option: str = "--psi") -> int:
    """Parse a parameter count: ``7.5e9``, ``7500000000``, ``7.5B``, ``175B``, ``1T``, ``350M``,
    ``25,557,032`` or ``25_557_032`` (the thousands separators zerocalc itself prints).

    A count is a whole number: ``1.5`` is refused, not rounded; a number with both an exponent and
    a suffix (``7.5e9B``) is refused as ambiguous. Text is read exactly (``decimal``), so
    ``1.234567B`` is 1,234,567,000. Returns a positive integer; raises :class:`ConfigError`
    naming ``option`` otherwise.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        if not math.isfinite(text):
            raise ConfigError(f"must be a positive number, got {text!r}", option=option)
        value = Decimal(text)
    else:
        m = _COUNT_RE.match(str(text))
        if not m or (m["int"] is None and m["frac"] is None) or m["sign"] == "-":
            if m and m["sign"] == "-" and (m["int"] or m["frac"]):
                raise ConfigError(f"must be a positive finite number, got {text!r}", option=option)
            raise ConfigError(f"{text!r} is not a count; {_COUNT_HINT}", option=option)
        if m["exp"] and m["suffix"]:
            raise ConfigError(f"{text!r} has both an exponent and a suffix; write 7.5e9 or 7.5B, "
                              "not both", option=option)
        digits = (m["int"] or "0").replace(",", "").replace("_", "") + (m["frac"] or "") + (m["exp"] or "")
        value = Decimal(digits) * _COUNT_SUFFIX[m["suffix"].upper()]
    if not value.is_finite() or value <= 0 or not math.isfinite(float(value)):
        raise ConfigError(f"must be a positive finite number, got {text!r}", option=option)
    if value != value.to_integral_value():
        raise ConfigError(f"must be a whole number of parameters, got {text!r}", option=option)
    return int(value)


_BYTE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
               "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "PIB": 2**50}
_BYTES_RE = re.compile(
    r"^\s*(?P<num>[0-9][0-9_,]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>[A-Za-z]*)\s*$")


def parse_bytes(text: str, option: str) -> int:
    """A size with its unit: ``80GB`` (1e9), ``80GiB`` (2**30), ``1.5TB``, ``8e10B``. A bare number
    is refused (GB or GiB? the difference is 7 %): the unit is part of the answer."""
    m = _BYTES_RE.match(str(text))
    unit = (m["unit"] or "").upper() if m else ""
    if not m or unit not in _BYTE_UNITS:
        hint = "give a unit, e.g. 80GB or 80GiB" if m and not m["unit"] else "write e.g. 80GB, 80GiB or 1.5TB"
        raise ConfigError(f"{text!r} is not a size; {hint}", option=option)
    value = parse_number(m["num"], option) * _BYTE_UNITS[unit]
    if not value > 0:
        raise ConfigError(f"must be positive, got {text!r}", option=option)
    return int(value)


#: Sizes past which a number is more likely a typo than a plan: no published model holds 1e14
#: parameters (the largest dense ones ~1e12: GPT-3 1.75e11, Llama 3.1 4.05e11; MoE totals below
#: 2e12) and no training cluster 1e6 GPUs (the largest reported: ~1e5, Llama 3 on 16k H100s,
#: arXiv 2407.21783 §3.3).
IMPLAUSIBLE_PSI = 10**14
IMPLAUSIBLE_RANKS = 10**6


def implausible(psi: float | None = None, n: float | None = None) -> list[str]:
    """Warnings for sizes far outside anything trained (the numbers are still computed)."""
    out = []
    if psi is not None and psi >= IMPLAUSIBLE_PSI:
        out.append(f"Psi = {psi:.3g} parameters is far beyond any trained model (the largest have ~2e12); "
                   "the figures are extrapolations")
    if n is not None and n >= IMPLAUSIBLE_RANKS:
        out.append(f"N = {n:.3g} ranks is far beyond any training cluster (the largest ~1e5 GPUs); "
                   "the figures are extrapolations")
    return out


def format_bytes(n: float, base: int = 1000) -> str:
    """``format_bytes(1.5e9) == '1.50 GB'``; ``base=1024`` gives KiB/MiB/GiB; units up to YB (1e24),
    so a size never prints as ``6e+08 TB``."""
    units = (["B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"] if base == 1000
             else ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"])
    value = float(n)
    for unit in units:
        if abs(value) < base or unit == units[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= base
    raise AssertionError("unreachable")


#: Relative or absolute differences below this are float64 rounding noise after a few dozen steps
#: (machine epsilon 2.2e-16 times the operations' count), whose digits depend on the BLAS build and
#: the summation order of the machine: text shows them as "< 1e-12", JSON keeps the value.
DIFF_FLOOR = 1e-12


def format_diff(x: float | None, digits: int = 1, floor: float = DIFF_FLOOR) -> str:
    """A parameter difference as text that is the same on every machine.

    ``format_diff(3.1e-3) == '3.1e-03'``, ``format_diff(0.0) == '0.0e+00'`` (an exact zero is no
    noise); a nonzero value below ``floor`` (rounding noise, see :data:`DIFF_FLOOR`) is ``'< 1e-12'``;
    None or NaN is ``'n/a'``.
    """
    if x is None or x != x:
        return "n/a"
    if x != 0 and abs(x) < floor:
        return f"< {floor:g}"
    return f"{x:.{digits}e}"


#: Seconds in a day and in a (Julian) year: a duration past a day reads in days, past a year in
#: years, never as ``2e+09 s``.
DAY_S = 86_400
YEAR_S = 365.25 * DAY_S


def format_seconds(t: float) -> str:
    """Seconds as text with a unit that keeps three significant digits (µs, ms, s; days and years
    past a day, which only absurd sizes reach)."""
    if t != t:  # NaN
        return "n/a"
    if abs(t) < 1e-3:
        return f"{t * 1e6:.3g} µs"
    if abs(t) < 1:
        return f"{t * 1e3:.3g} ms"
    if abs(t) < DAY_S:
        return f"{t:.3g} s"
    if abs(t) < YEAR_S:
        return f"{t / DAY_S:.3g} days"
    return f"{t / YEAR_S:.3g} years"
