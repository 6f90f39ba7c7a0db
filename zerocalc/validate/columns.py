"""Columns: the per-call numpy arrays the check works on, taken once from the canonical table.

A trace of millions of calls is checked on a few compact arrays, never on copies of the whole table:
the rows kept and their order are one index into the table (:class:`Rows`); a string column becomes
small integer codes over its distinct values (:class:`Codes`; a pandas ``category`` column gives its
own), a numeric column float64 with NaN where missing. Groups of calls ((rank, step), (op, size,
group size), ...) are numbered by combining codes (:func:`group_codes`), so per-group counts, sums and
searches run in numpy, or once per distinct group (:func:`distinct_runs`), not once per row or pair.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Codes:
    """A string column as integer codes (-1: missing) over ``names``."""

    codes: np.ndarray
    names: tuple[str, ...]

    def isin(self, values: Iterable[str]) -> np.ndarray:
        """Rows whose value is one of ``values``."""
        want = set(values)
        lut = np.array([n in want for n in self.names] + [False], dtype=bool)
        return lut[self.codes]  # code -1 reads the trailing False

    def eq(self, value: str) -> np.ndarray:
        """Rows whose value is ``value``."""
        return self.isin((value,))

    def take(self, idx) -> Codes:
        """The rows ``idx`` (an index or a mask)."""
        return Codes(self.codes[idx], self.names)

    def labels(self, na: str) -> np.ndarray:
        """Each row's value as a string (``na`` where missing), an object array."""
        return np.array(list(self.names) + [na], dtype=object)[self.codes]

    def present(self, mask: np.ndarray | None = None, na: str | None = None) -> list[str]:
        """The values that occur (in the rows of ``mask``), in the order of :attr:`names`, then ``na``
        if given and a value is missing."""
        c = self.codes if mask is None else self.codes[mask]
        seen = np.bincount(c[c >= 0], minlength=len(self.names)) > 0
        out = [n for n, s in zip(self.names, seen, strict=True) if s]
        return out + [na] if na is not None and (c < 0).any() else out

    def filled(self, na: str) -> Codes:
        """The same values with missing ones read as ``na`` (one code for ``na`` and any ``na`` value)."""
        if not (self.codes < 0).any():
            return self
        names = list(self.names)
        if na in names:
            k = names.index(na)
        else:
            k = len(names)
            names.append(na)
        return Codes(np.where(self.codes < 0, k, self.codes).astype(_small_int(len(names))), tuple(names))


def _small_int(n: int):
    """The narrowest signed integer type for codes 0 … n (and -1)."""
    return np.int8 if n < 127 else np.int16 if n < 32767 else np.int32 if n < 2**31 - 1 else np.int64


def string_codes(col: pd.Series) -> Codes:
    """A column as :class:`Codes`; values are named as ``astype(str)`` would name them.

    A ``category`` column keeps its own codes (its unused categories stay named, unused); any other
    column is factorized once.
    """
    if isinstance(col.dtype, pd.CategoricalDtype):
        names = tuple(str(c) for c in col.cat.categories)
        return Codes(col.cat.codes.to_numpy(), names)
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    return Codes(codes.astype(_small_int(len(uniques))), tuple(str(u) for u in uniques))


def numeric(col: pd.Series) -> np.ndarray:
    """A nullable column as float64 with NaN where missing."""
    if col.dtype.kind in "iufb":  # numeric already (nullable or not): no parsing
        return col.to_numpy(dtype=np.float64, na_value=np.nan)
    return pd.to_numeric(col, errors="coerce").astype("float64").to_numpy(na_value=np.nan)


def zero_nan(a: np.ndarray, value: float = 0.0, *, inplace: bool = False) -> np.ndarray:
    """``a`` with NaN replaced by ``value`` (as ``np.nan_to_num`` on arrays that hold no infinity);
    in place when asked and ``a`` may be written."""
    nan = np.isnan(a)
    if inplace and a.flags.writeable:
        a[nan] = value
        return a
    return np.where(nan, value, a)


@dataclass(frozen=True)
class Rows:
    """The calls a check works on: the canonical table's rows ``idx``, in that order.

    Columns are taken from the table when asked for, only at these rows (no copy of the table).
    """

    table: pd.DataFrame
    idx: np.ndarray
    #: the table's string columns as codes, factorized once (shared by every subset)
    _codes: dict = field(default_factory=dict, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.idx)

    def has(self, name: str) -> bool:
        """Whether the table has column ``name``."""
        return name in self.table.columns

    def num(self, name: str) -> np.ndarray:
        """Column ``name`` as float64, NaN where missing. A column missing everywhere (or absent) is a
        read-only view of one NaN, which takes no memory per call."""
        if name not in self.table.columns or not self.table[name].notna().any():
            return np.broadcast_to(np.float64(np.nan), (len(self.idx),))
        col = self.table[name]
        if col.dtype.kind in "iuf" and not isinstance(col.dtype, pd.api.extensions.ExtensionDtype):
            return col.to_numpy()[self.idx].astype(np.float64)
        return numeric(col.take(self.idx))

    def codes(self, name: str) -> Codes:
        """Column ``name`` as :class:`Codes` at these rows."""
        if name not in self._codes:
            self._codes[name] = string_codes(self.table[name])
        return self._codes[name].take(self.idx)

    def notna(self, name: str) -> np.ndarray:
        """Where column ``name`` holds a value."""
        return self.table[name].notna().to_numpy()[self.idx]

    def values(self, name: str) -> np.ndarray:
        """Column ``name`` as numbers to group by: non-negative integers as they are, float64 (NaN:
        missing) for another numeric column, else :class:`Codes`' codes (-1: missing)."""
        col = self.table[name]
        if col.dtype.kind in "iu" and not isinstance(col.dtype, pd.api.extensions.ExtensionDtype):
            v = col.to_numpy()[self.idx]  # plain integers, none missing: as they are unless negative
            if not len(v) or v.min() >= 0:
                return v
        if col.dtype.kind in "iufb":
            return self.num(name)
        return self.codes(name).codes

    def subset(self, keep: np.ndarray) -> Rows:
        """These rows where ``keep`` (a mask or index over them)."""
        return Rows(self.table, self.idx[keep], self._codes)


def isna(values: np.ndarray) -> np.ndarray:
    """Missing entries of :meth:`Rows.values`: NaN, or code -1."""
    return values < 0 if values.dtype.kind == "i" else np.isnan(values)


def group_codes(*arrays: np.ndarray) -> tuple[np.ndarray, int]:
    """One integer per distinct combination of the arrays' values, numbered in order of first
    appearance (as ``groupby(sort=False, dropna=False).ngroup()``; NaN is a value), and the count.

    Integer arrays of a small range (codes, ranks, steps) are combined as they are; other arrays are
    factorized first; the combination is factorized once.
    """
    n = len(arrays[0]) if arrays else 0
    if n == 0:
        return np.zeros(n, dtype=np.int64), 0
    code, size = None, 1
    for a in arrays:
        c, k = _small_codes(np.asarray(a))
        if c is None:
            c, u = pd.factorize(a, use_na_sentinel=False)
            c, k = c.astype(np.int64, copy=False), len(u)
        if code is None:
            code, size = c, k  # a new array in every case: combined in place below
            continue
        if size * k >= 1 << 62:
            code, u = pd.factorize(code)
            code, size = code.astype(np.int64, copy=False), len(u)
        code *= k
        code += c
        size *= k
        del c
    return _renumber(code, size)


def _small_codes(a: np.ndarray) -> tuple[np.ndarray | None, int]:
    """``a`` as non-negative integers below a small bound (value − min; NaN one past the largest) when
    its values are whole numbers of a small range (codes, ranks, steps, group sizes); (None, 0) else."""
    if a.dtype.kind in "iub":
        lo, hi = int(a.min()), int(a.max())
        return (np.subtract(a, lo, dtype=np.int64), hi - lo + 1) if hi - lo < 1 << 24 else (None, 0)
    if a.dtype.kind != "f" or not len(a):
        return None, 0
    with np.errstate(invalid="ignore"):  # NaN and values past int64 cast to meaningless integers
        c = a.astype(np.int64)
        whole = c == a  # False at NaN and at fractions
    nan = None
    if not whole.all():
        nan = np.isnan(a)
        if (nan != ~whole).any():  # a fraction or an infinity
            return None, 0
        if nan.all():
            return np.zeros(len(a), dtype=np.int64), 1
    vals = c if nan is None else c[~nan]
    lo, hi = int(vals.min()), int(vals.max())
    if hi - lo >= 1 << 24:
        return None, 0
    c -= lo
    if nan is not None:
        c[nan] = hi - lo + 1
    return c, hi - lo + 1 + (nan is not None)


def _renumber(code: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """Non-negative integers below ``size`` renumbered 0, 1, … in order of first appearance: through a
    table of each value's first row when ``size`` is small, else by hashing."""
    n = len(code)
    if size > n + 1024 or n >= 2**31:
        c, u = pd.factorize(code)
        return c.astype(np.int64), len(u)
    first = np.full(size, n, dtype=np.int32)  # tables of at most n entries, 4 B each
    np.minimum.at(first, code, np.arange(n, dtype=np.int32))
    values = np.flatnonzero(first < n)
    lut = np.empty(size, dtype=np.int32)
    lut[values[np.argsort(first[values], kind="stable")]] = np.arange(len(values), dtype=np.int32)
    del first
    return lut[code].astype(np.int64), len(values)


def group_sums(labels: np.ndarray, k: int, values: dict[str, np.ndarray], *,
               min_count: int = 0) -> pd.DataFrame:
    """Per label 0 … k-1 (every label present), the sum of each array in ``values``: the same floats as
    pandas' ``groupby(...).sum()`` on the same rows, without hashing the labels again; column ``size``
    counts the rows.

    Whole numbers whose magnitudes add up to less than 2⁵³ are summed by ``np.bincount``: every partial
    sum is then exact, in any order. Multiples of a power of two 2⁻ᵏ (:func:`dyadic_scale`: bytes sent
    over a ring of 2ᵃ ranks) are summed exactly as 64-bit integers and rounded once, so that a sum
    depends only on the values summed, not on their order or grouping. Other values go through pandas'
    own (compensated) group sum, one column at a time.
    """
    key = None
    out = {}
    for name, v in values.items():
        if _exact_whole(v):
            out[name] = np.bincount(labels, weights=v, minlength=k)
            continue
        scale = dyadic_scale(v)
        if scale is not None:  # multiples of 2^-scale: summed exactly as integers, rounded once
            out[name] = _int_sums(labels, k, v * 2.0**scale) / 2.0**scale
            continue
        if key is None:
            key = pd.Categorical.from_codes(labels, categories=pd.RangeIndex(k), validate=False)
        out[name] = (pd.Series(v, copy=False).groupby(key, observed=True, sort=True).sum(min_count=min_count)
                     .to_numpy())
    out["size"] = np.bincount(labels, minlength=k)
    return pd.DataFrame(out)


def dyadic_scale(v: np.ndarray, limit: float = 2.0**62) -> int | None:
    """The least ``k`` (up to 40) for which ``v`` × 2ᵏ are whole numbers whose magnitudes sum below
    ``limit`` (so that 64-bit integer sums of them are exact); None when there is none (a NaN, an
    infinity, a value with more fraction bits, or too large a total)."""
    if not len(v) or v.dtype.kind != "f":
        return None
    total = float(np.abs(v).sum())
    if not total < limit:  # NaN and infinity fail too
        return None
    for k in range(41):
        if total * 2.0**k >= limit:
            return None
        if np.all(np.mod(v * 2.0**k, 1.0) == 0.0):  # scaling by a power of two is exact
            return k
    return None


def _int_sums(labels: np.ndarray, k: int, whole: np.ndarray) -> np.ndarray:
    """Per label 0 … k-1, the exact sum of ``whole`` (whole float64 values whose magnitudes sum below
    2⁶³) as a 64-bit integer, converted to float64 once."""
    ints = whole.astype(np.int64)
    if not len(ints):
        return np.zeros(k)
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=k)
    sums = np.zeros(k, np.int64)
    present = np.flatnonzero(counts)
    starts = (np.cumsum(counts) - counts)[present]
    sums[present] = np.add.reduceat(ints[order], starts)
    return sums.astype(np.float64)


def exact_total(v: np.ndarray, w: np.ndarray | None = None) -> float | None:
    """The sum of ``v`` (each taken ``w`` times), exact and rounded once, where its values are
    multiples of one power of two (:func:`dyadic_scale`); None where they are not."""
    scaled = v if w is None else v * w
    if not len(scaled):
        return 0.0
    k = dyadic_scale(np.asarray(scaled, dtype=np.float64))
    if k is None:
        return None
    return float(int((np.asarray(scaled, dtype=np.float64) * 2.0**k).astype(np.int64).sum())) / 2.0**k


def _exact_whole(v: np.ndarray) -> bool:
    """Whether ``v`` holds only whole numbers whose magnitudes sum below 2⁵³ (so float sums are exact)."""
    if not len(v) or v.dtype.kind != "f":
        return False
    total = float(np.abs(v).sum())  # NaN or infinity fail the test below
    return total < 2.0**53 and bool(np.all(np.mod(v, 1.0) == 0.0))


def sorted_labels(key: np.ndarray) -> tuple[np.ndarray, int]:
    """Non-negative integers renumbered 0, 1, … in increasing order (a table when small, else sorting)."""
    if not len(key):
        return np.zeros(0, dtype=np.int64), 0
    size = int(key.max()) + 1
    if size <= 4 * len(key) + 1024:
        present = np.bincount(key, minlength=size) > 0
        return (np.cumsum(present) - 1)[key], int(present.sum())
    u, inv = np.unique(key, return_inverse=True)
    return inv.reshape(-1), len(u)


def group_ranges(labels: np.ndarray, k: int, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per label 0 … k-1, the least and the greatest of ``values``, NaN left out (inf and -inf for a label
    with none)."""
    lo, hi = np.full(k, np.inf), np.full(k, -np.inf)
    ok = ~np.isnan(values)
    np.fmin.at(lo, labels[ok], values[ok])
    np.fmax.at(hi, labels[ok], values[ok])
    return lo, hi


def first_rows(labels: np.ndarray) -> np.ndarray:
    """The row where each label first appears, for labels numbered in order of first appearance
    (:func:`group_codes`): row i is a first exactly when its label exceeds every label before it."""
    if not len(labels):
        return np.zeros(0, dtype=np.int64)
    seen = np.maximum.accumulate(labels)
    return np.flatnonzero(np.concatenate([[True], seen[1:] > seen[:-1]]))


def run_bounds(key: np.ndarray) -> np.ndarray:
    """Start of each run of equal consecutive values of ``key``, and its end (length n + 1 array)."""
    if len(key) == 0:
        return np.zeros(1, dtype=np.int64)
    return np.concatenate([[0], np.flatnonzero(key[1:] != key[:-1]) + 1, [len(key)]])


_MULT = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))


def distinct_runs(codes: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """For each run ``codes[bounds[i]:bounds[i+1]]``, the index of the first run equal to it.

    Runs are hashed (two polynomial hashes mod 2⁶⁴ and the length) and every run is then compared
    element by element with the first run of its hash, so the answer is exact: a run whose hash
    collides with a different run is its own representative. Lets a search that depends only on a
    run's values (a step's call sequence) run once per distinct run.
    """
    n_runs = len(bounds) - 1
    if n_runs <= 0:
        return np.zeros(0, dtype=np.int64)
    lengths = np.diff(bounds)
    run_of = np.repeat(np.arange(n_runs), lengths)
    pos = np.arange(len(codes)) - bounds[:-1][run_of]
    v = codes.astype(np.int64).astype(np.uint64) + np.uint64(1)
    keys = [lengths.astype(np.int64)]
    with np.errstate(over="ignore"):
        for mult in _MULT:
            powers = np.cumprod(np.full(int(lengths.max()), mult, dtype=np.uint64), dtype=np.uint64)
            keys.append(np.add.reduceat(v * powers[pos], bounds[:-1]).view(np.int64))
    label, _ = group_codes(*keys)  # numbered in order of first appearance
    rep = first_rows(label)[label]
    # exact: every element equal to the same position of its representative run
    differs = codes != codes[bounds[:-1][rep][run_of] + pos]
    bad = np.bincount(run_of[differs], minlength=n_runs) > 0
    rep[bad] = np.flatnonzero(bad)
    return rep
