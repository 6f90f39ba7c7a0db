"""NCCL's Inspector profiler plugin output (NCCL 2.28 on: ``ext-profiler/inspector``, from 2.30
``plugins/profiler/inspector``; ``inspector_json.cc``, output format ``v4.0`` throughout).

Each process writes ``<hostname>-pid<pid>.log`` into ``NCCL_INSPECTOR_DUMP_DIR`` (default
``nccl-inspector-<slurm job id>``): one JSON object a line, one per completed collective per communicator
it is a rank of::

    {"header": {"id": "0x7f8c496ae9f661", "comm_name": "...", "rank": 2, "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism": "...",
                  "dump_timestamp_us": 1748030377748202, "hostname": "node-1", "pid": 1639453},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                   "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 277.21, "coll_busbw_gbs": 485.12}}

(``comm_name`` from NCCL 2.30; point-to-point operations as ``p2p_perf`` with ``p2p``, ``p2p_peer``,
``p2p_msg_size_bytes``, ``p2p_exec_time_us``; ``NCCL_INSPECTOR_DUMP_VERBOSE=1`` adds the event trace.)
What the fields mean (``inspector.cc``, ``inspector_plugin.cc``):

* ``coll_msg_size_bytes`` is the call's count × its type's size as NCCL's profiler hands it over: the whole
  buffer of an all-reduce, broadcast or reduce, one rank's part of an all-gather (its send) or a
  reduce-scatter (its receive); ``inspectorComputeOpBw`` multiplies those two by ``n_ranks``, as nccl-tests'
  size is the whole gathered buffer.
* ``coll_exec_time_us`` is the longest of the call's channels' kernel time by the GPU's global timer
  (``kernel_gpu``), else by their CPU timestamps (``kernel_cpu``), else the call's own CPU start to stop
  (``collective_cpu``), in whole microseconds.
* Calls below ``NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES`` (8192 by default) are not written.
* ``header.rank`` is the rank within the communicator, ``nnodes`` the nodes its ranks are on, ``id`` the
  communicator's hash, the same in every rank's file.
* ``coll_sn`` is NCCL's ``comm->seqNumber[func]`` (``src/plugin/profiler.cc``): one count per communicator and
  collective, so the records of one call carry the same number on every rank.

A file states no NCCL version (``git_rev`` is the plugin's build) and names no GPU.

:func:`parse` reads one file's records (a line that is not one is refused with its line number, or skipped
and counted); :func:`sweeps` gathers the records of all the files given into one sweep per communicator
and collective: each size's measured time is the median of its calls' ``exec_time`` over every rank, as
nccl-tests' is the mean of its timed iterations over the ranks.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from zerocalc.errors import TraceFormatError
from zerocalc.traces.records import SkipLog, bad

FORMAT = "nccl_inspector"

#: ``coll`` names (``ncclFuncToString``, ``inspector.cc``) → (canonical op, factor of the message size that
#: gives nccl-tests' size: ``n`` = × ``n_ranks``); ``None``: recorded, not priced per size.
COLLECTIVES: dict[str, tuple[str, str] | None] = {
    "AllReduce": ("all_reduce", "1"), "Broadcast": ("broadcast", "1"), "Reduce": ("reduce", "1"),
    "AllGather": ("all_gather", "n"), "ReduceScatter": ("reduce_scatter", "n"),
    "AllGatherV": None, "All2All": None, "SendRecv": None, "Send": None, "Recv": None,
}

#: The timing sources, best first (``inspectorTimingSourceToString``).
TIMING_SOURCES = ("kernel_gpu", "kernel_cpu", "collective_cpu")


@dataclass(frozen=True, slots=True)
class Record:
    """One completed operation of one rank of one communicator, as one line states it."""

    file: str
    line: int
    comm: str
    comm_name: str
    rank: int
    n_ranks: int
    nnodes: int
    host: str
    name: str
    sn: int | None
    msg_bytes: int
    exec_s: float
    source: str
    p2p: bool


def _int(obj: dict, key: str, where: str, minimum: int = 0) -> int:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"{where}.{key} is not a whole number ≥ {minimum}: {v!r}")
    return v


def _number(obj: dict, key: str, where: str) -> float:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0 or v == float("inf"):
        raise ValueError(f"{where}.{key} is not a number ≥ 0: {v!r}")
    return float(v)


def record(obj: Any, file: str, line: int) -> Record:
    """The :class:`Record` of one decoded line; ``ValueError`` saying which field does not fit."""
    if not isinstance(obj, dict) or not isinstance(obj.get("header"), dict):
        raise ValueError("not an Inspector record (no 'header' object)")
    head = obj["header"]
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    p2p = "p2p_perf" in obj
    perf = obj.get("p2p_perf" if p2p else "coll_perf")
    if not isinstance(perf, dict):
        raise ValueError("an Inspector record without a 'coll_perf' or 'p2p_perf' object")
    kind, where = ("p2p", "p2p_perf") if p2p else ("coll", "coll_perf")
    name = perf.get(kind)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.{kind} names no operation")
    n = _int(head, "n_ranks", "header", 1)
    rank = _int(head, "rank", "header")
    if rank >= n:
        raise ValueError(f"header.rank {rank} is not below header.n_ranks {n}")
    nnodes = _int(head, "nnodes", "header", 1)
    if nnodes > n:
        raise ValueError(f"header.nnodes {nnodes} is more than header.n_ranks {n}")
    source = perf.get(f"{kind}_timing_source", "")
    sn = perf.get(f"{kind}_sn")
    sn = sn if isinstance(sn, int) and not isinstance(sn, bool) else None
    return Record(file, line, str(head.get("id", "")), str(head.get("comm_name") or ""), rank, n, nnodes,
                  str(meta.get("hostname") or ""), name, sn, _int(perf, f"{kind}_msg_size_bytes", where),
                  _number(perf, f"{kind}_exec_time_us", where) * 1e-6, str(source or ""), p2p)


def _objects(text: str) -> Iterable[tuple[int, Any | None, str]]:
    """``(line, decoded object or None, why not)`` of each JSON value in ``text``: one a line as the plugin
    writes them, or spread over lines (a record pretty-printed, as its README shows them); a line that does
    not decode is reported and reading goes on at the next line."""
    decoder = json.JSONDecoder()
    pos, line, end = 0, 1, len(text)
    while True:
        start = pos
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        line += text.count("\n", start, pos)
        if pos >= end:
            return
        try:
            obj, stop = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            nl = text.find("\n", pos)
            yield line, None, f"not JSON ({exc.msg})"
            if nl < 0:
                return
            pos, line = nl + 1, line + 1
            continue
        yield line, obj, ""
        line += text.count("\n", pos, stop)
        pos = stop


@dataclass
class Inspected:
    """One Inspector file read: its records, the lines skipped and the output format versions it states."""

    records: list[Record]
    skipped: SkipLog
    versions: tuple[str, ...]


def parse_bytes(data: bytes, file: str, *, strict: bool = False) -> Inspected:
    """One Inspector file's records (:class:`Record`); a line that is not one is refused (``strict``) or
    skipped and counted."""
    records: list[Record] = []
    skipped = SkipLog()
    versions: set[str] = set()
    for line, obj, why in _objects(data.decode("utf-8", errors="replace")):
        if obj is None:
            bad(file, line, why, strict, skipped)
            continue
        try:
            rec = record(obj, file, line)
        except ValueError as exc:
            bad(file, line, str(exc), strict, skipped)
            continue
        meta = obj.get("metadata")
        if isinstance(meta, dict) and meta.get("inspector_output_format_version"):
            versions.add(str(meta["inspector_output_format_version"]))
        records.append(rec)
    return Inspected(records, skipped, tuple(sorted(versions)))


@dataclass
class Sweep:
    """One communicator's calls of one collective, as a sweep: one row per size (nccl-tests' size, the
    median measured time, the calls and ranks it is of) and the run's facts the check reads."""

    label: str
    op: str
    group_size: int
    rows: list[dict] = field(default_factory=list)
    run: dict = field(default_factory=dict)


def sweeps(records: Sequence[Record], label: str) -> tuple[list[Sweep], list[str]]:
    """The records of every file given (``label`` names them) as sweeps, one per communicator and collective
    in order of first appearance, and the notes on what is not priced (point-to-point records, all-to-all,
    a communicator whose records disagree on its ranks or nodes). Raises :class:`TraceFormatError` where no
    record is left to price."""
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    unpriced: Counter = Counter()
    for r in records:
        spec = COLLECTIVES.get(r.name)
        if spec is None:
            unpriced[r.name] += 1
            continue
        groups[r.comm, r.name].append(r)
    notes = [f"{label}: {k} {name} record(s) not priced per size (Inspector's "
             f"{'point-to-point' if name in ('Send', 'Recv', 'SendRecv') else name} records)"
             for name, k in unpriced.items()]
    out = []
    for (comm, name), recs in groups.items():
        shapes = {(r.n_ranks, r.nnodes) for r in recs}
        if len(shapes) > 1:
            first = recs[0]
            raise TraceFormatError(first.file, first.line, f"communicator {comm} is stated with different "
                                   f"ranks/nodes ({', '.join(f'{n}/{m}' for n, m in sorted(shapes))})")
        ((n, nnodes),) = shapes
        op, factor = COLLECTIVES[name]  # type: ignore[misc]
        by_size: dict[int, list[Record]] = defaultdict(list)
        for r in recs:
            by_size[r.msg_bytes * (n if factor == "n" else 1)].append(r)
        rows = []
        for size in sorted(by_size):
            timed = [r for r in by_size[size] if r.exec_s > 0]
            if not timed or size <= 0:
                continue
            calls = _fastest(timed)
            rows.append({"size_bytes": size, "count": by_size[size][0].msg_bytes, "elem_bytes": None,
                         "dtype": None, "redop": None, "op": op, "group_size": n,
                         "duration_s": statistics.median(calls), "calls": len(calls),
                         "records": len(timed), "ranks": len({r.rank for r in timed}),
                         "all_ranks_median_s": statistics.median(r.exec_s for r in timed),
                         "timing_sources": dict(Counter(r.source for r in timed)),
                         "source_line": timed[0].line})
        if not rows:
            continue
        hosts = {r.rank: r.host for r in recs if r.host}
        listed = Counter(hosts.values()) if len(hosts) == n else {}
        line = recs[0].line
        run = {"run": len(out), "op": op, "layout": FORMAT, "hosts": dict(listed),
               "nccl_info": ({"nodes": (nnodes, line), "local_ranks": (n // nnodes, line),
                              "said_by": "the Inspector records' header (n_ranks, nnodes)"}
                             if n % nnodes == 0 else {}),
               "inspector": {"communicator": comm, "comm_name": recs[0].comm_name or None, "nnodes": nnodes,
                             "ranks_recorded": len({r.rank for r in recs}),
                             "files": sorted({r.file for r in recs})}}
        out.append(Sweep(label, op, n, rows, run))
    if not out:
        raise TraceFormatError(label, None, "no Inspector collective records to price"
                               + (f" ({'; '.join(notes)})" if notes else ""))
    return out, notes


def _fastest(records: list[Record]) -> list[float]:
    """Each call's time on its fastest rank: the records of one call (its sequence number, the same on every
    rank of a communicator) give the shortest kernel time, the rank that joined last having waited least;
    a record without a sequence number is a call of its own."""
    calls: dict[object, float] = {}
    for i, r in enumerate(records):
        key = ("sn", r.sn) if r.sn is not None else ("line", r.file, i)
        calls[key] = min(calls.get(key, r.exec_s), r.exec_s)
    return list(calls.values())


def sweep_note(s: Sweep) -> str:
    """What a sweep's measured times are, for its notes."""
    calls = sum(r["calls"] for r in s.rows)
    sources = Counter()
    for r in s.rows:
        sources.update(r["timing_sources"])
    order = {k: i for i, k in enumerate(TIMING_SOURCES)}
    how = ", ".join(f"{k or 'timing source not stated'}: {v}"
                    for k, v in sorted(sources.items(), key=lambda kv: order.get(kv[0], len(order))))
    info = s.run["inspector"]
    name = f" ({info['comm_name']})" if info.get("comm_name") else ""
    return (f"NCCL Inspector records of communicator {info['communicator']}{name}: {s.group_size} ranks "
            f"on {info['nnodes']} node(s), {info['ranks_recorded']} of them recorded; measured is the "
            f"median over each size's {calls} call(s) of the call's time on its fastest recorded rank "
            f"({how}; whole µs, the call's longest channel): a rank's kernel time holds its wait for the "
            "others, least on the rank that joined last")
