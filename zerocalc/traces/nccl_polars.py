"""The fields of NCCL ``COLL`` lines pulled out of a block of a log by polars, vectorised.

Two readers, both in native code with no Python object per line except the few distinct values of
each few-valued field:

- :func:`extract_fields` (the default): polars (https://pola.rs) splits each line at literal
  separators (`` opCount ``, ``NCCL INFO ``, a space) and reads the parts by their place in NCCL's
  layout, the few-valued ones once per distinct text; the lines in any other form go to the ``re``
  scanner. About three and a half times the speed of the regex readers, per core
  (benchmarks/bench_scale.py: 151 MB/s against 42 and 45 on the synthetic 128-rank log).
- :func:`extract_regex`: Rust's ``regex`` crate over the lines (``Series.str.extract_groups``), for
  the lines where the ``host:pid:tid [dev] `` prefix precedes ``NCCL INFO``; a block in which some
  line with the ``opCount`` marker is not in that form goes to the ``re`` scanner whole.

A block that is not valid UTF-8 is left to the ``re`` scanner (:mod:`zerocalc.traces.nccl_scan`),
which reads every form and reports what it cannot read: the rows are the same whichever reads them
(tests/test_traces_nccl_engines.py compares the three on every bundled log, on synthetic ones and
on random and malformed lines).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import numpy as np

#: ASCII whitespace, as Python's ``\\s`` in a bytes pattern reads it (Rust's ``\\s`` is Unicode's).
_WS = r"\t\n\x0b\x0c\r "
_S = f"[^{_WS}]"
#: :data:`zerocalc.traces.nccl_lines.COLL` with its prefix required, in the syntax of Rust's regex
#: crate, which has no look-behind: the host starts the line or follows whitespace or a colon
#: (``(?<![^\\s:])``), and the leftmost match takes the whole run of host characters, as Python's
#: lazy scan does. A line holds at most one place where the body matches (nccl_lines' ``_TIERS``).
PATTERN = (
    f"(?:^|[{_WS}:])(?P<host>[^{_WS}:]+):(?P<pid>[0-9]{{1,18}}):(?P<tid>[0-9]{{1,18}})"
    r" \[(?P<dev>[0-9]{1,9})\] "
    r"NCCL INFO (?:\[[0-9]+\] )?(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]{1,15})"
    f" sendbuff {_S}+ recvbuff {_S}+ count (?P<count>[0-9]{{1,18}})"
    r" datatype (?P<datatype>[0-9]{1,9}) op (?P<redop>[0-9]{1,9}) root (?P<root>-?[0-9]{1,18})"
    f" comm (?P<comm>{_S}+)"
    r"(?: \[nranks=(?P<nranks>[0-9]{1,9})\])?"
    f" stream {_S}+"
    r"(?: task [0-9]+ globalrank (?P<globalrank>[0-9]{1,9}))?[ \t\r]*$"
)


def available() -> bool:
    """Whether polars can be imported.

    The reader scans a large log in one process per CPU (zerocalc.traces.chunks), so polars is
    started with one thread unless ``POLARS_MAX_THREADS`` says otherwise (and unless something
    imported it first): a pool of threads per process would compete with the processes (measured
    on the synthetic 128-rank log, benchmarks/bench_scale.py: more CPU time in all, no less wall
    time).
    """
    if "polars" not in sys.modules:
        os.environ.setdefault("POLARS_MAX_THREADS", "1")
    try:
        import polars  # noqa: F401
    except ImportError:
        return False
    return True


def extract_regex(text: bytes, end: int, line0: int, res: Any) -> tuple | None:
    """The calls of the block ``text[1:end]`` (whole lines, the first line ``line0``), coded
    into ``res``'s tables (:class:`~zerocalc.traces.nccl_scan.Scan`); ``None`` when the block
    is left to the ``re`` scanner (see the module's docstring).

    Returns (codes of the few-valued fields, numbers: pid/count/opcount, the calls' lines, the
    lines with the marker that are neither calls nor comments (``None`` if none), newlines in
    ``text[:end]``); the block's Init and TUNING lines go to ``res``.
    """
    import polars as pl

    from zerocalc.traces import nccl_lines

    try:
        lines_text = text[1 : end - 1].decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = pl.Series("line", lines_text.split("\n"), dtype=pl.String)
    del lines_text
    marked = lines.str.contains(nccl_lines.MARKER, literal=True)
    at = np.flatnonzero(marked.to_numpy())
    g = lines.filter(marked).str.extract_groups(PATTERN).struct.unnest()
    unmatched = None
    if g["op"].null_count():  # lines with the marker that are not calls in this form
        miss = g["op"].is_null().to_numpy()
        rest = lines.filter(marked).filter(miss)
        if rest.str.contains("NCCL INFO ", literal=True).any():  # maybe a call in another form: re's
            return None
        # not calls in any form: reported unless a comment, as the re scanner does
        comment = rest.str.strip_chars_start(" \t\n\r\x0b\x0c").str.starts_with("#").to_numpy()
        unmatched = at[miss][~comment].astype(np.int64) + line0
        at = at[~miss]
        g = g.filter(~miss)
    codes = {name: _codes(g[name], res.tables[name]) for name in nccl_lines._FACTORS}
    numbers = {"pid": g["pid"].cast(pl.Int64).to_numpy(), "count": g["count"].cast(pl.Int64).to_numpy(),
               "opcount": g["opcount"].str.to_integer(base=16).cast(pl.Int64).to_numpy()}
    at = at.astype(np.int64) + line0
    _others(lines, marked, at, line0, text, res)
    return codes, numbers, at, unmatched, len(lines) + 1


def _codes(col: Any, table: Any) -> np.ndarray:
    """Codes of a field's values in ``table`` (bytes → code, growing), one lookup per distinct value."""
    import polars as pl

    values = col.unique(maintain_order=True).to_list()
    known = [v for v in values if v is not None]
    out = col.replace_strict(known, [table[v.encode("utf-8")] for v in known], default=None,
                             return_dtype=pl.Int32)
    if len(known) < len(values):
        out = out.fill_null(table[None])
    return out.to_numpy().astype(np.int32, copy=False)


# ---------------------------------------------------------------------------------------------
# The positional reader: literal splits, no regex captures
# ---------------------------------------------------------------------------------------------

#: A COLL line is cut at its first `` opCount ``: before it the text up to ``NCCL INFO `` and the op,
#: after it the opCount value and, after one space, the rest of the call, which changes little from
#: call to call (the same buffers, counts and communicators, step after step) and is read once per
#: distinct text. Each part is read as :data:`zerocalc.traces.nccl_lines.COLL` reads it (NCCL's
#: layout, NCCL ``src/enqueue.cc``, with or without ``[nranks=]``; ``NCCL INFO [k]``; RCCL's
#: ``task N globalrank M`` tail; blanks at the end), given a line with no whitespace but single spaces.
_OPCOUNT = " opCount "
#: The op's text → its value as the ``re`` scanner captures it (bytes), or not a call.
_OP = re.compile(rb"(?:\[[0-9]+\] )?([A-Za-z]+):")
#: The tail of a call from its datatype, its words at single spaces: datatype, reduction, root,
#: communicator, ``[nranks=]``, stream and RCCL's global rank, each as the ``re`` scanner captures it.
_TAIL = (rb"datatype (?P<datatype>[0-9]{1,9}) op (?P<redop>[0-9]{1,9}) root (?P<root>-?[0-9]{1,18})"
         rb" comm (?P<comm>[^ ]+)(?: \[nranks=(?P<nranks>[0-9]{1,9})\])? stream [^ ]+"
         rb"(?: task [0-9]+ globalrank (?P<globalrank>[0-9]{1,9}))? *")
#: The rest of a call after its opCount: buffers, count and the tail.
_REST = re.compile(rb"sendbuff [^ ]+ recvbuff [^ ]+ count (?P<count>[0-9]{1,18}) " + _TAIL)
_TAIL_FIELDS = ("datatype", "redop", "root", "comm", "nranks", "globalrank")
#: The words of the rest by position where its distinct texts are too many to read one by one
#: (buffers or counts that change from call to call); the last part is the tail.
_REST_WORDS = {0: "sendbuff", 2: "recvbuff", 4: "count"}
#: A block whose distinct texts before ``NCCL INFO`` outnumber this (a launcher that stamps each
#: line with the time) has its ``host:pid:tid [dev]`` cut out of each by one regex first.
_MANY_PREFIXES = 4096
#: Missing integer (as in nccl_lines).
_NA = -1
_PREFIX_END = f"(?:^|[{_WS}:])([^{_WS}:]+:[0-9]{{1,18}}:[0-9]{{1,18}} \\[[0-9]{{1,9}}\\] )$"
#: A block whose distinct rests (:data:`_REST`) outnumber both this and its calls over
#: :data:`_CALLS_PER_REST` reads them by position in polars rather than each with ``re``.
_MANY_RESTS = 4096
_CALLS_PER_REST = 4


def extract_fields(text: bytes, end: int, line0: int, res: Any) -> tuple | None:
    """The calls of the block ``text[1:end]`` (whole lines, the first line ``line0``) read by position,
    coded into ``res``'s tables; what :func:`extract` returns, or ``None`` when the block is left to
    the ``re`` scanner (not UTF-8, a byte polars' line reader takes for a separator, a BOM).

    polars reads the lines (its CSV reader with a separator no line holds), keeps those with the
    ``opCount`` marker and cuts each (``str.splitn``: memchr speed, no regex) at its first `` opCount ``
    (the head before it: the prefix, ``NCCL INFO `` and the op, :func:`_heads`) and the part after it
    at its first space (the opCount value and the rest, :data:`_REST`). A line is a call here when these
    parts are in NCCL's or RCCL's layout (:data:`_OPCOUNT`), its numbers are plain digits of the
    lengths ``re`` accepts, and no whitespace other than spaces is in it; every other marked line (a
    tab, a second space between words, ``opCount`` in the prefix, a malformed call) goes to the ``re``
    scanner, so the rows are the same. The few-valued parts (the head, and the rest after the
    opCount: buffers, count, datatype, reduction, root, communicator, ``[nranks=]``, stream) are read
    once per distinct text with ``re`` (the prefix by :data:`zerocalc.traces.nccl_lines.PREFIX`, as the
    scanner reads it): 128 heads and about a thousand rests per block of 15,000 calls in a log of 128
    ranks (read in polars where they are many), where splitting every line into all its twenty words
    took longer.
    """
    import polars as pl

    from zerocalc.traces import nccl_lines

    block = text if end == len(text) else text[:end]  # the newline first: an empty line, dropped
    if b"\x01" in block or block.startswith(b"\n\xef\xbb\xbf"):
        return None
    try:
        lines = pl.read_csv(block, has_header=False, separator="\x01", quote_char=None, new_columns=["l"],
                            infer_schema=False)["l"].slice(1)
    except pl.exceptions.PolarsError:  # not UTF-8
        return None
    del block
    n_lines = len(lines)
    marked = lines.str.contains(nccl_lines.MARKER, literal=True).fill_null(False)
    at = np.flatnonzero(marked.to_numpy())
    calls = lines.filter(marked)
    parts = calls.str.splitn(_OPCOUNT, 2).struct.unnest()  # the last part holds the rest
    head, after = parts["field_0"], parts["field_1"]
    parts = after.str.splitn(" ", 2).struct.unnest()
    opcount, rest = parts["field_0"], parts["field_1"]
    value = opcount.str.to_integer(base=16, strict=False)
    ok = rest.is_not_null() & value.is_not_null() & (opcount.str.len_bytes() <= 15) \
        & ~opcount.str.starts_with("+") & ~opcount.str.starts_with("-")
    if any(c in text for c in (b"\t", b"\x0b", b"\x0c")):  # whitespace other than " " ends a field
        ok &= ~calls.str.contains("[\t\x0b\x0c]")
    ok = ok.fill_null(False).to_numpy().copy()
    tables = res.tables
    good, codes, pid = _heads(head, tables)
    ok &= good
    good, rest_codes, count = _rests(rest, tables)
    ok &= good
    codes.update(rest_codes)
    numbers = {"pid": pid, "count": count, "opcount": value.fill_null(0).to_numpy()}
    keep = np.flatnonzero(ok)
    codes = {name: c[keep] for name, c in codes.items()}
    numbers = {name: np.asarray(c, np.int64)[keep] for name, c in numbers.items()}
    found = at[keep].astype(np.int64) + line0
    unmatched = None
    if len(keep) < len(at):  # the other marked lines: the re scanner's
        left = np.flatnonzero(~ok)
        codes, numbers, found, unmatched = _by_re(calls.gather(left), at[left].astype(np.int64) + line0, res,
                                                  codes, numbers, found)
    _others(lines, marked, found, line0, text, res)
    return codes, numbers, found, unmatched, n_lines + 1


def _factorize(col: Any) -> tuple[list, np.ndarray]:
    """The distinct values of a string column (``None`` last where some is missing) and each row's
    index among them."""
    import polars as pl

    known = col.unique(maintain_order=True).drop_nulls()
    inverse = col.replace_strict(known, pl.int_range(len(known), dtype=pl.Int32, eager=True), default=None,
                                 return_dtype=pl.Int32)
    values = known.to_list()
    if col.null_count():
        inverse = inverse.fill_null(len(values))
        values.append(None)
    return values, inverse.to_numpy()


def _read_distinct(col: Any, pattern: re.Pattern, names: dict, tables: Any) -> tuple[np.ndarray, dict]:
    """Each distinct text of a few-valued column matched once by ``pattern`` (in full): whether each
    row matched, and the codes in ``tables`` of the groups of ``names`` (field → group; ``_NA`` where
    the row did not match)."""
    distinct, inverse = _factorize(col)
    found = [pattern.fullmatch(v.encode("utf-8")) if v is not None else None for v in distinct]
    good = np.array([m is not None for m in found], bool)[inverse]
    codes = {name: np.array([tables[name][m[g]] if m is not None else _NA for m in found], np.int32)[inverse]
             for name, g in names.items()}
    return good, codes


def _heads(head: Any, tables: Any) -> tuple[np.ndarray, dict, np.ndarray]:
    """The heads of the calls, before their `` opCount ``: whether each is a prefix, ``NCCL INFO `` and
    an op, the codes in ``tables`` of its host, tid, dev and op, and its pid. Each distinct head is
    cut at its first ``NCCL INFO `` and read once (the prefix by
    :data:`zerocalc.traces.nccl_lines.PREFIX`, the op by :data:`_OP`); where there are many (a
    launcher that stamps each line with the time), cut in polars and read as :func:`_prefixes` does."""
    from zerocalc.traces import nccl_lines

    distinct, inverse = _factorize(head)
    if len(distinct) > _MANY_PREFIXES:
        parts = head.str.splitn("NCCL INFO ", 2).struct.unnest()
        good, codes = _read_distinct(parts["field_1"], _OP, {"op": 1}, tables)
        host_codes, pid = _prefixes(parts["field_0"], tables)
        return good, {**codes, **host_codes}, pid
    ops, pres = [], []
    for v in distinct:
        text = v.encode("utf-8") if v is not None else b""
        at = text.find(b"NCCL INFO ")
        ops.append(_OP.fullmatch(text, at + 10) if at >= 0 else None)
        pres.append(nccl_lines.PREFIX.search(text[:at]) if at >= 0 else None)
    good = np.array([m is not None for m in ops], bool)[inverse]
    codes = {"op": np.array([tables["op"][m[1]] if m is not None else _NA for m in ops], np.int32)[inverse]}
    for name in ("host", "tid", "dev"):
        codes[name] = np.array([tables[name][m[name] if m else None] for m in pres], np.int32)[inverse]
    pid = np.array([int(m["pid"]) if m else _NA for m in pres], np.int64)[inverse]
    return good, codes, pid


def _rests(rest: Any, tables: Any) -> tuple[np.ndarray, dict, np.ndarray]:
    """The rests of the calls after their opCount (:data:`_REST`): whether each is a call's, the
    codes of its few-valued fields in ``tables`` and its count. Each distinct rest is read once by
    ``re``; where there are many (buffers or counts that change from call to call), the buffers and the
    count are read by position and the tail once per distinct text."""
    import polars as pl

    distinct, inverse = _factorize(rest)
    if len(distinct) <= max(_MANY_RESTS, len(rest) // _CALLS_PER_REST):
        found = [_REST.fullmatch(v.encode("utf-8")) if v is not None else None for v in distinct]
        good = np.array([m is not None for m in found], bool)[inverse]
        codes = {name: np.array([tables[name][m[name]] if m is not None else _NA for m in found],
                                np.int32)[inverse] for name in _TAIL_FIELDS}
        count = np.array([int(m["count"]) if m is not None else 0 for m in found], np.int64)[inverse]
        return good, codes, count
    words = rest.str.splitn(" ", 7).struct.unnest()
    ok = words["field_6"].is_not_null()
    for i, word in _REST_WORDS.items():
        ok &= words[f"field_{i}"] == word
    for i in (1, 3):
        ok &= words[f"field_{i}"].str.len_bytes() > 0
    s = words["field_5"]
    value = s.str.to_integer(base=10, strict=False)
    ok &= value.is_not_null() & (s.str.len_bytes() <= 18) & ~s.str.starts_with("+") & ~s.str.starts_with("-")
    good, codes = _read_distinct(words["field_6"], re.compile(_TAIL), {n: n for n in _TAIL_FIELDS}, tables)
    good &= ok.fill_null(False).to_numpy()
    return good, codes, value.fill_null(0).cast(pl.Int64).to_numpy()


def _prefixes(pre: Any, tables: Any) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The codes of host, tid and dev, and the pid, of each call from the text before its
    ``NCCL INFO`` (:data:`zerocalc.traces.nccl_lines.PREFIX`, ``_NA`` where it has none)."""
    from zerocalc.traces import nccl_lines

    distinct, inverse = _factorize(pre)
    if len(distinct) > _MANY_PREFIXES:  # a different text on each line: cut out the prefix first
        distinct, inverse = _factorize(pre.str.extract(_PREFIX_END, 1))
    found = [nccl_lines.PREFIX.search(v.encode("utf-8")) if v is not None else None for v in distinct]
    codes = {name: np.array([tables[name][m[key] if m else None] for m in found], np.int32)[inverse]
             for name, key in (("host", "host"), ("tid", "tid"), ("dev", "dev"))}
    pid = np.array([int(m["pid"]) if m else _NA for m in found], np.int64)[inverse]
    return codes, pid


def _by_re(rest: Any, rest_lines: np.ndarray, res: Any, codes: dict, numbers: dict,
           lines: np.ndarray) -> tuple[dict, dict, np.ndarray, np.ndarray | None]:
    """The marked lines that the positional reader leaves (``rest``, at block lines ``rest_lines``)
    read by the ``re`` scanner, merged in line order with the calls read by position."""
    from zerocalc.traces import nccl_scan

    sub = b"\n" + "\n".join(rest.fill_null("").to_list()).encode("utf-8") + b"\n"
    inits, tunings = res.inits, res.tunings
    res.inits, res.tunings = [], []  # read with the block's other Init and TUNING lines (_others)
    try:
        more_codes, more_numbers, more_lines, unmatched, _ = nccl_scan._extract_re(sub, len(sub), 0, res)
    finally:
        res.inits, res.tunings = inits, tunings
    more_lines = rest_lines[more_lines]
    order = np.argsort(np.concatenate([lines, more_lines]), kind="stable")
    codes = {k: np.concatenate([codes[k], more_codes[k]])[order] for k in codes}
    numbers = {k: np.concatenate([numbers[k], more_numbers[k]])[order] for k in numbers}
    lines = np.concatenate([lines, more_lines])[order]
    return codes, numbers, lines, (rest_lines[unmatched] if unmatched is not None else None)


def _others(lines: Any, marked: Any, calls: np.ndarray, line0: int, text: bytes, res: Any) -> None:
    """The Init and TUNING lines of a block, in order, among its lines that are not calls (``calls``:
    the calls' lines, from ``line0``), read into ``res`` as the ``re`` scanner reads them."""
    from zerocalc.traces import nccl_lines, nccl_scan

    if len(calls) == len(lines):  # every line a call: no Init or TUNING line (those are not calls)
        return
    markers = [m for m in (nccl_lines._INIT_MARKER, nccl_lines._TUNING_MARKER) if m in text]
    if not markers:
        return
    hit = None
    for m in markers:
        found = lines.str.contains(m.decode(), literal=True).fill_null(False)
        hit = found if hit is None else hit | found
    at = np.flatnonzero(hit.to_numpy())
    at = at[~np.isin(at + line0, calls)]
    nccl_scan._read_others([(int(j) + line0, lines[int(j)].encode("utf-8")) for j in at], res)
