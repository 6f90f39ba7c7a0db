"""NCCL debug logs (``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL[,TUNING,INIT]``).

One ``COLL`` line per collective call, unchanged since NCCL 2.4 (REFERENCE §5)::

    host:pid:tid [dev] NCCL INFO AllReduce: opCount 1a sendbuff 0x.. recvbuff 0x.. count 4096
        datatype 7 op 0 root 0 comm 0x.. [nranks=8] stream 0x..

RCCL appends `` task N globalrank N``; launchers prepend their own prefixes (searched,
not anchored); one real log has ``NCCL INFO [2] AllReduce:``. ``[dev]`` is the CUDA
device, not the rank: the rank comes from the ``comm .. rank r nranks p .. Init COMPLETE``
line of the same process and communicator, or from RCCL's ``globalrank``; otherwise NA.
``TUNING`` lines (``AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE ...``) give the
algorithm and protocol of the preceding call of that thread.

The log is streamed in blocks of a few MB (constant memory in the file size, apart from
the table itself). Each block is parsed column-wise: one ``findall`` of the compiled COLL
regex in C gives the fields of every call; each column is converted through small
per-block lookup tables of its distinct values, and the table is assembled with numpy
(issue 4: >= 100 MB/s). Only a block with a COLL-looking line that does not match is
re-read line by line, to report that line.
"""

from __future__ import annotations

import re
from itertools import repeat
from typing import Any, TextIO

import numpy as np

from zerocalc.errors import TraceFormatError
from zerocalc.traces.records import ParseResult, bad
from zerocalc.traces.schema import DTYPE_BYTES, NCCL_COLL_OPS, NCCL_DATATYPES, NCCL_REDOPS

FORMAT = "nccl_log"

#: The marker every COLL line carries; a line with it that does not match COLL is skipped.
MARKER = "opCount "
#: The marker of a TUNING line.
TUNING_MARKER = " Bytes -> Algo "

#: A COLL line; the groups, in order, are the fields the table needs (see ``_FIELDS``). The
#: ``host:pid:tid [dev] `` prefix is the one that ends right before ``NCCL INFO``, as PREFIX.
COLL = re.compile(
    r"^[^\n]*?(?:(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] )?"
    r"NCCL INFO (?:\[\d+\] )?(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]+)"
    r" sendbuff \S+ recvbuff \S+ count (?P<count>\d+)"
    r" datatype (?P<datatype>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>\S+)"
    r"(?: \[nranks=(?P<nranks>\d+)\])? stream \S+"
    r"(?: task \d+ globalrank (?P<globalrank>\d+))?[ \t\r]*$",
    re.M,
)
_FIELDS = tuple(COLL.groupindex)
PREFIX = re.compile(r"(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] $")
INIT = re.compile(
    r"^(?P<pre>[^\n]*?)NCCL INFO [^\n]*?comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+)"
    r" nranks (?P<nranks>\d+)[^\n]*- Init COMPLETE",
    re.M,
)
TUNING = re.compile(
    r"^(?P<pre>[^\n]*?)NCCL INFO (?:\[\d+\] )?(?P<op>[A-Za-z]+): (?P<bytes>\d+) Bytes -> "
    r"Algo (?P<algo>[^\s,]+) proto (?P<proto>[^\s,]+)",
    re.M,
)

#: Characters per block read from the stream (the block is cut at its last newline).
_BLOCK_CHARS = 1 << 22
_UNMATCHED = "line has 'opCount' but not the NCCL COLL layout"
#: in/out factor of ``count`` (NCCL_COLL_OPS): 0, 1, or × nranks.
_FACTOR_CODES = {"0": 0, "1": 1, "p": 2}


def _prefix(pre: str) -> tuple[str | None, int | None, int | None, int | None]:
    """``host:pid:tid [dev] `` at the end of whatever precedes ``NCCL INFO``."""
    m = PREFIX.search(pre)
    return (m["host"], int(m["pid"]), int(m["tid"]), int(m["dev"])) if m else (None, None, None, None)


def _redop(code: int) -> str:
    return NCCL_REDOPS.get(code, f"premulsum:{code}" if code >= 5 else str(code))


def _dtype(code: int) -> str:
    dtype = NCCL_DATATYPES.get(code)
    return dtype if dtype is not None else f"nccl:{code}"


def _optional_ints(values: tuple[str, ...]) -> dict[str, int | None]:
    """Each distinct value of an optional integer group → its int, or None when it is absent."""
    return {s: int(s) if s else None for s in set(values)}


def _check(op: str, nranks: int | None) -> str | None:
    """Why a matched COLL line is not a row, or ``None``."""
    if op not in NCCL_COLL_OPS:
        return f"unknown NCCL collective {op!r}"
    if nranks is not None and nranks < 1:
        return f"nranks={nranks} is not a group size"
    return None


def _scale(count: int, factor: str, p: int | None) -> int | None:
    if factor == "1":
        return count
    if factor == "0":
        return 0
    return count * p if p is not None else None


def parse_coll_line(line: str, *, file: str = "<line>", lineno: int | None = None) -> dict[str, Any] | None:
    """One COLL line → a row dict; ``None`` for a line without ``opCount``.

    Raises :class:`TraceFormatError` for a line that carries the COLL marker but not its layout.
    """
    if MARKER not in line:
        return None
    text = line.rstrip("\n")
    m = COLL.search(text) if "\n" not in text else None
    if m is None:
        raise TraceFormatError(file, lineno, _UNMATCHED)
    nranks = int(m["nranks"]) if m["nranks"] is not None else None
    reason = _check(m["op"], nranks)
    if reason is not None:
        raise TraceFormatError(file, lineno, reason)
    op, fin, fout = NCCL_COLL_OPS[m["op"]]
    count, dtype = int(m["count"]), _dtype(int(m["datatype"]))
    host, pid, tid, dev = m["host"], *(int(m[k]) if m[k] is not None else None for k in ("pid", "tid", "dev"))
    return {
        "file": file, "rank": int(m["globalrank"]) if m["globalrank"] is not None else None,
        "op": op, "dtype": dtype, "elem_bytes": DTYPE_BYTES.get(dtype),
        "in_nelems": _scale(count, fin, nranks), "out_nelems": _scale(count, fout, nranks),
        "group_size": nranks, "group": m["comm"], "source_line": lineno if lineno is not None else 0,
        "nccl_op": m["op"], "count": count, "opcount": int(m["opcount"], 16),
        "redop": _redop(int(m["redop"])), "root": int(m["root"]),
        "host": host, "pid": pid, "tid": tid, "device": dev,
    }


class _Columns:
    """The table being built: one list per column, extended block by block."""

    #: Columns in the order of the table.
    NAMES = ("rank", "op", "dtype", "elem_bytes", "group_size", "group", "source_line", "nccl_op",
             "count", "opcount", "redop", "root", "host", "pid", "tid", "device", "fin", "fout")

    def __init__(self) -> None:
        self.cols: dict[str, list] = {name: [] for name in self.NAMES}
        self.comm_rank: dict[tuple[Any, Any, str], tuple[int, int]] = {}
        self.last_by_thread: dict[tuple[Any, Any, Any], int] = {}
        self.tuning: dict[int, tuple[str, str, int]] = {}

    def __len__(self) -> int:
        return len(self.cols["source_line"])

    def add_block(self, found: list[tuple[str, ...]], lines: list[int]) -> None:
        """Convert the regex groups of one block's valid COLL lines and append them."""
        if not found:
            return
        f = dict(zip(_FIELDS, zip(*found, strict=True), strict=True))
        c = self.cols
        ops = f["op"]
        c["nccl_op"] += ops
        c["op"] += map({o: NCCL_COLL_OPS[o][0] for o in set(ops)}.__getitem__, ops)
        c["fin"] += map({o: _FACTOR_CODES[NCCL_COLL_OPS[o][1]] for o in set(ops)}.__getitem__, ops)
        c["fout"] += map({o: _FACTOR_CODES[NCCL_COLL_OPS[o][2]] for o in set(ops)}.__getitem__, ops)
        dtypes = {s: _dtype(int(s)) for s in set(f["datatype"])}
        c["dtype"] += map(dtypes.__getitem__, f["datatype"])
        c["elem_bytes"] += map({s: DTYPE_BYTES.get(d) for s, d in dtypes.items()}.__getitem__, f["datatype"])
        c["redop"] += map({s: _redop(int(s)) for s in set(f["redop"])}.__getitem__, f["redop"])
        c["group_size"] += map(_optional_ints(f["nranks"]).__getitem__, f["nranks"])
        c["rank"] += map(_optional_ints(f["globalrank"]).__getitem__, f["globalrank"])
        c["count"] += map(int, f["count"])
        c["opcount"] += map(int, f["opcount"], repeat(16))
        c["root"] += map(int, f["root"])
        c["group"] += f["comm"]
        c["host"] += map({s: s or None for s in set(f["host"])}.__getitem__, f["host"])
        for key, col in (("pid", "pid"), ("tid", "tid"), ("dev", "device")):
            c[col] += map(_optional_ints(f[key]).__getitem__, f[key])
        c["source_line"] += lines

    def table(self, file: str) -> dict[str, Any]:
        """The finished columns: canonical ones first, then the NCCL extras."""
        import pandas as pd

        c = self.cols
        n = len(self)
        count = pd.array(np.array(c["count"], dtype=np.int64), dtype="Int64")
        scaled = count * pd.array(c["group_size"], dtype="Int64")  # NA where the line has no nranks
        nelems = {}
        for side in ("fin", "fout"):
            code = np.array(c.pop(side), dtype=np.int8)
            col = scaled.copy()
            col[code == 1] = count[code == 1]
            col[code == 0] = 0
            nelems[side] = col
        if self.comm_rank:  # after the sizes: those use the line's own nranks only
            for i in [i for i, r in enumerate(c["rank"]) if r is None]:
                hit = self.comm_rank.get((c["host"][i], c["pid"][i], c["group"][i]))
                if hit is not None:
                    c["rank"][i] = hit[0]
                    if c["group_size"][i] is None:
                        c["group_size"][i] = hit[1]
        out: dict[str, Any] = {
            "file": [file] * n, "rank": c["rank"], "op": c["op"], "dtype": c["dtype"],
            "elem_bytes": c["elem_bytes"], "in_nelems": nelems["fin"], "out_nelems": nelems["fout"],
        }
        out.update((k, c[k]) for k in self.NAMES[4:16])
        if self.tuning:
            get = self.tuning.get
            for j, name in enumerate(("algorithm", "protocol", "tuning_bytes")):
                out[name] = [t[j] if t is not None else None for t in map(get, range(n))]
        return out


def parse(stream: TextIO, file: str, *, strict: bool = False) -> ParseResult:
    """Stream an NCCL log and return its table, one row per COLL line."""
    res = ParseResult(meta={"format": FORMAT, "backend": "nccl"})
    cols = _Columns()
    line0 = 1  # line number of the first line of the current block
    tail = ""
    while True:
        chunk = stream.read(_BLOCK_CHARS)
        block = tail + chunk
        tail = ""
        if chunk:
            cut = block.rfind("\n") + 1
            block, tail = block[:cut], block[cut:]
        if block:
            _parse_block(block, file, line0, strict, res, cols)
            line0 += block.count("\n")
        if not chunk:
            break
    table = cols.table(file)
    ranks = set(table["rank"]) - {None}
    sizes = set(table["group_size"]) - {None}
    res.meta.update(
        rank=next(iter(ranks)) if len(ranks) == 1 else None,
        world_size=max(sizes) if sizes else None,
        processes=len(set(zip(table["host"], table["pid"], strict=True))),
    )
    res.columns = table if len(cols) else None  # no rows: the reader's empty table
    return res


def _parse_block(block: str, file: str, line0: int, strict: bool, res: ParseResult, cols: _Columns) -> None:
    """Parse the whole lines of one block (the first is line ``line0``) into ``cols``."""
    found = COLL.findall(block)
    texts = block.split("\n")
    marked = [i for i, text in enumerate(texts) if MARKER in text]
    unmatched: list[int] = []
    if len(found) != block.count(MARKER):  # slow path: which marker lines did not match?
        hits = [i for i in marked if COLL.search(texts[i]) is not None]
        unmatched = [i for i in marked
                     if COLL.search(texts[i]) is None and not texts[i].lstrip().startswith("#")]
        marked = hits
    lines = [line0 + i for i in marked]
    reasons = {}
    i_op, i_n = _FIELDS.index("op"), _FIELDS.index("nranks")
    if not set(g[i_op] for g in found) <= NCCL_COLL_OPS.keys() or any(
            g[i_n] and int(g[i_n]) < 1 for g in found):
        reasons = {j: r for j, g in enumerate(found)
                   if (r := _check(g[i_op], int(g[i_n]) if g[i_n] else None)) is not None}
        for j, reason in reasons.items():
            bad(file, lines[j], reason, strict, res.skipped)
        found = [g for j, g in enumerate(found) if j not in reasons]
        lines = [ln for j, ln in enumerate(lines) if j not in reasons]
    for i in unmatched:
        bad(file, line0 + i, _UNMATCHED, strict, res.skipped)
    first = len(cols)
    cols.add_block(found, lines)
    if "Init COMPLETE" in block:
        for m in INIT.finditer(block):
            host, pid, _, _ = _prefix(m["pre"])
            cols.comm_rank[(host, pid, m["comm"])] = (int(m["rank"]), int(m["nranks"]))
    if TUNING_MARKER in block:
        _attach_tuning(block, line0, lines, first, cols)


def _attach_tuning(block: str, line0: int, lines: list[int], first: int, cols: _Columns) -> None:
    """Give each TUNING line's algorithm and protocol to the preceding call of its thread."""
    c = cols.cols
    events: list[tuple[int, int, Any]] = [(ln, 0, first + j) for j, ln in enumerate(lines)]
    pos, line = 0, line0
    for m in TUNING.finditer(block):
        line += block.count("\n", pos, m.start())
        pos = m.start()
        events.append((line, 1, m))
    events.sort(key=lambda e: (e[0], e[1]))
    for _, kind, obj in events:
        if kind == 0:
            cols.last_by_thread[(c["host"][obj], c["pid"][obj], c["tid"][obj])] = obj
            continue
        host, pid, tid, _ = _prefix(obj["pre"])
        row = cols.last_by_thread.get((host, pid, tid))
        if row is not None and c["nccl_op"][row] == obj["op"] and row not in cols.tuning:
            cols.tuning[row] = (obj["algo"], obj["proto"], int(obj["bytes"]))
