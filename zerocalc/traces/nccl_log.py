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

The log is streamed in blocks (constant memory in the file size); each block is matched
with one compiled regex in C and only lines that look like COLL lines but do not match
are re-read one by one to report them.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

from zerocalc.errors import TraceFormatError
from zerocalc.traces.records import ParseResult, bad
from zerocalc.traces.schema import DTYPE_BYTES, NCCL_COLL_OPS, NCCL_DATATYPES, NCCL_REDOPS

FORMAT = "nccl_log"

#: The marker every COLL line carries; a line with it that does not match COLL is skipped.
MARKER = "opCount "

COLL = re.compile(
    r"^(?P<pre>[^\n]*?)NCCL INFO (?:\[\d+\] )?(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]+)"
    r" sendbuff (?P<sendbuff>\S+) recvbuff (?P<recvbuff>\S+) count (?P<count>\d+)"
    r" datatype (?P<datatype>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>\S+)"
    r"(?: \[nranks=(?P<nranks>\d+)\])? stream (?P<stream>\S+)"
    r"(?: task (?P<task>\d+) globalrank (?P<globalrank>\d+))?[ \t\r]*$",
    re.M,
)
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

_BLOCK_CHARS = 1 << 22

_prefix_cache: dict[str, tuple[str | None, int | None, int | None, int | None]] = {}


def _prefix(pre: str) -> tuple[str | None, int | None, int | None, int | None]:
    """``host:pid:tid [dev] `` at the end of whatever precedes ``NCCL INFO`` (cached)."""
    hit = _prefix_cache.get(pre)
    if hit is None:
        m = PREFIX.search(pre)
        hit = (m["host"], int(m["pid"]), int(m["tid"]), int(m["dev"])) if m else (None, None, None, None)
        if len(_prefix_cache) < 100_000:
            _prefix_cache[pre] = hit
    return hit


def _row(m: re.Match, file: str, lineno: int) -> dict[str, Any]:
    name = m["op"]
    spec = NCCL_COLL_OPS.get(name)
    if spec is None:
        raise TraceFormatError(file, lineno, f"unknown NCCL collective {name!r}")
    op, fin, fout = spec
    count = int(m["count"])
    code = int(m["datatype"])
    dtype = NCCL_DATATYPES.get(code)
    nranks = m["nranks"]
    p = int(nranks) if nranks is not None else None
    if p is not None and p < 1:
        raise TraceFormatError(file, lineno, f"nranks={p} is not a group size")
    host, pid, tid, dev = _prefix(m["pre"])
    redop = int(m["redop"])
    grank = m["globalrank"]
    return {
        "file": file,
        "rank": int(grank) if grank is not None else None,
        "op": op,
        "dtype": dtype if dtype is not None else f"nccl:{code}",
        "elem_bytes": DTYPE_BYTES.get(dtype) if dtype is not None else None,
        "in_nelems": _scale(count, fin, p),
        "out_nelems": _scale(count, fout, p),
        "group_size": p,
        "group": m["comm"],
        "source_line": lineno,
        "nccl_op": name,
        "count": count,
        "opcount": int(m["opcount"], 16),
        "redop": NCCL_REDOPS.get(redop, f"premulsum:{redop}" if redop >= 5 else str(redop)),
        "root": int(m["root"]),
        "host": host,
        "pid": pid,
        "tid": tid,
        "device": dev,
    }


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
        raise TraceFormatError(file, lineno, "line has 'opCount' but not the NCCL COLL layout")
    return _row(m, file, lineno if lineno is not None else 0)


def parse(stream: TextIO, file: str, *, strict: bool = False) -> ParseResult:
    """Stream an NCCL log and return one row per COLL line."""
    res = ParseResult(meta={"format": FORMAT, "backend": "nccl"})
    rows = res.rows
    comm_rank: dict[tuple[Any, Any, str], tuple[int, int]] = {}
    last_by_thread: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    line0 = 1  # line number of the first line of the current block
    tail = ""
    while True:
        chunk = stream.read(_BLOCK_CHARS)
        block = tail + chunk
        if not chunk:
            tail = ""
        else:
            cut = block.rfind("\n") + 1
            block, tail = block[:cut], block[cut:]
            if not block:
                tail = block + tail
                continue
        if block:
            _parse_block(block, file, line0, strict, res, comm_rank, last_by_thread)
            line0 += block.count("\n")
        if not chunk:
            break
    for row in rows:
        if row["rank"] is None:
            hit = comm_rank.get((row["host"], row["pid"], row["group"]))
            if hit is not None:
                row["rank"] = hit[0]
                if row["group_size"] is None:
                    row["group_size"] = hit[1]
    ranks = {r["rank"] for r in rows if r["rank"] is not None}
    sizes = {r["group_size"] for r in rows if r["group_size"] is not None}
    res.meta.update(
        rank=next(iter(ranks)) if len(ranks) == 1 else None,
        world_size=max(sizes) if sizes else None,
        processes=len({(r["host"], r["pid"]) for r in rows}),
    )
    return res


def _parse_block(block, file, line0, strict, res, comm_rank, last_by_thread) -> None:
    rows = res.rows
    n_marker = block.count(MARKER)
    pos, line = 0, line0
    events: list[tuple[int, dict[str, Any]]] = []
    want_tuning = " Bytes -> Algo " in block
    count_nl = block.count
    matched = 0
    for m in COLL.finditer(block):
        start = m.start()
        line += count_nl("\n", pos, start)
        pos = start
        try:
            row = _row(m, file, line)
        except TraceFormatError as exc:
            if strict:
                raise
            res.skipped.add(file, line, exc.reason)
            matched += 1
            continue
        matched += 1
        rows.append(row)
        if want_tuning:
            events.append((start, row))
    if matched != n_marker:
        _report_unmatched(block, file, line0, strict, res)
    if "Init COMPLETE" in block:
        for m in INIT.finditer(block):
            host, pid, _, _ = _prefix(m["pre"])
            comm_rank[(host, pid, m["comm"])] = (int(m["rank"]), int(m["nranks"]))
    if want_tuning:
        tunings = [(m.start(), m) for m in TUNING.finditer(block)]
        merged = sorted([(s, 0, r) for s, r in events] + [(s, 1, m) for s, m in tunings], key=lambda t: t[0])
        for _, kind, obj in merged:
            if kind == 0:
                last_by_thread[(obj["host"], obj["pid"], obj["tid"])] = obj
                continue
            host, pid, tid, _ = _prefix(obj["pre"])
            row = last_by_thread.get((host, pid, tid))
            if row is not None and row["nccl_op"] == obj["op"] and "algorithm" not in row:
                row["algorithm"] = obj["algo"]
                row["protocol"] = obj["proto"]
                row["tuning_bytes"] = int(obj["bytes"])


def _report_unmatched(block: str, file: str, line0: int, strict: bool, res: ParseResult) -> None:
    """Slow path for a block with COLL-looking lines that did not match: find and report them."""
    for i, text in enumerate(block.split("\n")):
        if MARKER in text and not text.lstrip().startswith("#") and COLL.search(text) is None:
            bad(file, line0 + i, "line has 'opCount' but not the NCCL COLL layout", strict, res.skipped)
