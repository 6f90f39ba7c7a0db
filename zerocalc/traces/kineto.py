"""PyTorch profiler (Kineto) Chrome-trace JSON → one row per collective call.

Every schema generation since 2023 (PyTorch ``record_param_comms``), resolved through the tables of
:mod:`zerocalc.traces.schema`:

* a call is the outermost of the nested CPU events ``c10d::<op>`` ⊃ ``record_param_comms``
  ⊃ ``nccl:<op>`` on one thread;
* sizes come from the ``record_param_comms`` arguments (``In msg nelems`` ..., or
  ``In msg size`` in late 2023), else from the ``Input Dims`` of the ``nccl:<op>``
  annotation (pre-2023 traces), else from the ``Input Dims`` of the ``c10d::`` op by
  its signature (gloo). A ``TensorList`` argument gives sizes but no dtype: dtype NA;
* GPU kernels (``ncclKernel_*`` up to NCCL 2.18, ``ncclDevKernel_*`` after) are linked by
  ``External id`` or, in old traces, by ``correlation`` → ``cudaLaunch*`` → the call that
  encloses the launch on that thread; their time is ``start_s``/``duration_s``;
* over gloo, the ``gloo:<op>`` annotations of the worker threads are matched to the calls
  in issue order, only when the two sequences agree in length, op and size everywhere
  (``link`` column says so); they give the transport time and the element type;
* ``wait`` entries are dropped; ``ProfilerStep#k`` annotations give ``step``.

:func:`parse_bytes` decodes with msgspec only the fields it reads, into compact objects, and
keeps only the events the table uses (benchmarks/bench_kineto.py); anything else falls back to
a full orjson decode. The reader caps the decompressed size.
"""

from __future__ import annotations

import ast
import bisect
import codecs
import math
from collections.abc import Iterable
from typing import Any, NamedTuple, Union

import msgspec
import orjson

from zerocalc.errors import TraceFormatError
from zerocalc.traces.records import ParseResult, bad
from zerocalc.traces.schema import (
    C10D_OPS,
    DTYPE_BYTES,
    GLOO_TRANSPORT_OPS,
    KINETO_ANNOTATION_OPS,
    KINETO_ARG_GENERATIONS,
    KINETO_COLLECTIVE_NAMES,
    KINETO_IGNORED_COLLECTIVES,
    TORCH_DTYPES,
)

FORMAT = "kineto"
_KERNEL_PREFIXES = ("ncclKernel", "ncclDevKernel")
#: Name prefixes of the events that may matter (with ``record_param_comms`` and runtime launches).
_NAME_PREFIXES = ("c10d::", "nccl:", "gloo:", "ProfilerStep#", *_KERNEL_PREFIXES)
_US = 1e-6
_NO_ARGS = msgspec.Raw()


class _Event(msgspec.Struct, tag="X", tag_field="ph", gc=False):
    """The fields of one complete event (``"ph": "X"``) that the parser reads; others are skipped.

    ``args`` stays an undecoded slice of the input (``msgspec.Raw``) until the parser
    needs it, which is for a few hundred of the tens of thousands of events.
    """

    name: Any = None
    cat: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None
    args: msgspec.Raw = _NO_ARGS


# Every other event phase of the Chrome trace event format: decoded as an empty object.
_OTHER_PHASES = tuple(msgspec.defstruct(f"_Phase{i}", [], tag=ph, tag_field="ph", gc=False)
                      for i, ph in enumerate("B E i I C b n e S T p F s t f P N O D M V v R c ( )".split()))

_ANY_EVENT = Union[(_Event, *_OTHER_PHASES)]  # noqa: UP007 (built from a tuple)


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[_ANY_EVENT]  # noqa: N815 (the JSON key)
    distributedInfo: msgspec.Raw = _NO_ARGS  # noqa: N815


_DECODER = msgspec.json.Decoder(_Trace)


class _Invalid(Exception):
    """The fast path met input it does not vouch for: decode the whole document instead."""


def parse_bytes(data: bytes, file: str, *, strict: bool = False) -> ParseResult:
    """Parse a whole Kineto trace held in memory.

    Decodes only the fields the table needs (``_Event``), into compact objects, and keeps
    only the events it uses: about a third of the time and of the memory of decoding every
    event into dicts first. Anything that path does not vouch for (not UTF-8, malformed JSON,
    events that are not objects or have an unknown or missing ``ph``, a bare list of events,
    an ``args`` value orjson rejects) is decoded in full with orjson and parsed by
    :func:`parse_document`, so results and errors are the same either way, with one
    exception: a number beyond double range in a field the parser never reads is accepted.
    """
    try:
        if not _utf8(data):
            raise _Invalid
        trace = _DECODER.decode(data)
        res = ParseResult(meta={"format": FORMAT})
        info = _dist_info(_args(trace.distributedInfo), file, strict, res)
        events = trace.traceEvents
        del trace
        maybe = _NameFilter()
        sel = _select([(i, e) for i, e in enumerate(events)
                       if type(e) is _Event and type(n := e.name) is str and maybe[n]],
                      len(events), file, strict, res)
        del events  # drop the decoded events before building anything else
        return _build(sel, info, res, file)
    except (msgspec.DecodeError, _Invalid):
        pass
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(file, None, f"not valid JSON ({exc})") from None
    return parse_document(doc, file, strict=strict)


def _utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8 (msgspec does not check strings it skips), in bounded memory."""
    if isinstance(data, bytes | bytearray) and data.isascii():
        return True
    dec = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    try:
        for i in range(0, len(view), 1 << 20):
            dec.decode(view[i:i + (1 << 20)])
        dec.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _args(raw: Any) -> Any:
    """The decoded value of an ``args`` (or ``distributedInfo``) field; ``None`` if absent."""
    if type(raw) is not msgspec.Raw:
        return raw  # already decoded (parse_document)
    if not raw:
        return None
    try:
        return orjson.loads(memoryview(raw))
    except orjson.JSONDecodeError:  # e.g. a number beyond double range, which msgspec accepts
        raise _Invalid from None


def _dist_info(info: Any, file: str, strict: bool, res: ParseResult) -> dict:
    if isinstance(info, str):  # some exporters write the Python repr of the dict
        try:
            info = ast.literal_eval(info)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            bad(file, None, "distributedInfo is a string that is not a literal dict", strict, res.skipped)
            info = None
    return info if isinstance(info, dict) else {}


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _prod(dims: Any) -> int | None:
    if not isinstance(dims, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        return None
    n = 1
    for d in dims:
        n *= d
    return n


def _arg_nelems(args: dict, i: int) -> tuple[int | None, str | None]:
    """Elements and dtype of argument ``i`` of an op from ``Input Dims``/``Input type``."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or i >= len(dims) or i < 0:
        return None, None
    t = types[i] if isinstance(types, list) and i < len(types) else None
    d = dims[i]
    if t in ("TensorList", "GenericList") or (isinstance(d, list) and d and isinstance(d[0], list)):
        # a list of tensors: dims are nested; an empty list means the shapes were not recorded
        if not isinstance(d, list) or not d:
            return None, None
        total = 0
        for sub in d:
            n = _prod(sub)
            if n is None:
                return None, None
            total += n
        return total, None
    if not isinstance(t, str) or t in ("", "Scalar", "ScalarList", "None"):
        return None, None
    return _prod(d), TORCH_DTYPES.get(t, t)


def parse_document(doc: Any, file: str, *, strict: bool = False) -> ParseResult:
    """Parse a decoded trace (a dict with ``traceEvents``, or a bare list of events)."""
    if isinstance(doc, list):
        events, doc = doc, {}
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        events = doc["traceEvents"]
    else:
        raise TraceFormatError(file, None, "not a Chrome trace: no 'traceEvents' list")
    res = ParseResult(meta={"format": FORMAT})
    info = _dist_info(doc.get("distributedInfo"), file, strict, res)
    maybe = _NameFilter()
    used: list[tuple[int, _Event | None]] = []  # the events _select may use, as _Event; None = not an object
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            used.append((i, None))
            continue
        name = e.get("name")
        if e.get("ph") == "X" and type(name) is str and maybe[name]:
            used.append((i, _Event(name, e.get("cat"), e.get("ts"), e.get("dur"), e.get("pid"),
                                   e.get("tid"), e.get("args"))))
    return _build(_select(used, len(events), file, strict, res), info, res, file)


#: Types a pid or tid may have: what identifies a thread must be hashable and comparable.
_SCALARS = (int, str, float)


class _Selected(NamedTuple):
    """What the table needs of a trace, in compact form; the events themselves are not kept."""

    n_events: int
    recs: dict[int, tuple[str, Any, Any, Any]]  # event index -> (name, ts, dur, args) of used events
    comm: dict[Any, list[tuple[float, float, int, str]]]  # thread -> (ts, end, index, kind)
    steps: list[tuple[float, float, int]]
    gloo: list[tuple[float, float, int, Any]]  # (ts, end, index, worker thread)
    kernels: list[int]
    launches: list[tuple[Any, Any, float]]  # (args, thread, ts) of cudaLaunch* calls, in order


# What one (name, cat) pair of a complete ("X") event is to the parser.
_SKIP, _KERNEL, _LAUNCH, _STEP, _GLOO, _C10D, _RPC, _ANNOT, _CHECKED = range(9)


def _classify(name: str, cat: Any) -> int:
    """The role of an event by name and category; ``_CHECKED`` = relevant, then dropped."""
    if not (name.startswith(_NAME_PREFIXES) or name == "record_param_comms"
            or (cat == "cuda_runtime" and "Launch" in name)):
        return _SKIP
    if cat == "kernel":
        return _KERNEL if name.startswith(_KERNEL_PREFIXES) else _CHECKED
    if cat == "cuda_runtime":
        return _LAUNCH
    if name.startswith("ProfilerStep#"):
        return _STEP
    if name.startswith("gloo:"):
        return _GLOO if cat == "user_annotation" else _CHECKED
    if name.startswith("nccl:") and cat != "user_annotation":
        return _CHECKED  # gpu_user_annotation duplicates
    return _C10D if name.startswith("c10d::") else _RPC if name == "record_param_comms" else _ANNOT


class _NameFilter(dict):
    """name -> whether an event of that name may matter, whatever its category (cached)."""

    def __missing__(self, name: str) -> bool:
        v = self[name] = name.startswith(_NAME_PREFIXES) or name == "record_param_comms" or "Launch" in name
        return v


_COMM_KIND = {_C10D: "c10d", _RPC: "rpc", _ANNOT: "annot"}


def _select(events: Iterable[tuple[int, _Event | None]], n_events: int, file: str, strict: bool,
            res: ParseResult) -> _Selected:
    """Keep what the table needs of (index, complete event) pairs that passed :class:`_NameFilter`.

    ``None`` stands for an event that is not an object.
    """
    sel = _Selected(n_events, {}, {}, [], [], [], [])
    recs, comm, launches = sel.recs, sel.comm, sel.launches
    roles: dict[tuple[str, Any], int] = {}
    for i, e in events:
        if e is None:
            bad(file, i, "event is not an object", strict, res.skipped)
            continue
        name, cat = e.name, e.cat
        key = (name, cat if type(cat) is str else None)  # any other category plays no part
        role = roles.get(key)
        if role is None:
            role = roles[key] = _classify(*key)
        if role == _SKIP:
            continue
        ts, dur = _num(e.ts), _num(e.dur)
        if ts is None or dur is None or dur < 0:
            bad(file, i, f"event {name[:40]!r} without a valid ts/dur", strict, res.skipped)
            continue
        thread = (e.pid, e.tid)
        if not all(x is None or type(x) in _SCALARS for x in thread):
            bad(file, i, f"event {name[:40]!r} with a pid/tid that is not a number or a string",
                strict, res.skipped)
            continue
        if role == _LAUNCH:  # arguments decoded only if a kernel has to be linked by correlation
            launches.append((e.args, thread, ts))
        elif role == _KERNEL:
            args = _args(e.args)
            sel.kernels.append(i)
            recs[i] = (name, e.ts, e.dur, args)
        elif role == _STEP:
            k = _int(name[len("ProfilerStep#"):])
            if k is not None:
                sel.steps.append((ts, ts + dur, k))
        elif role == _GLOO:
            sel.gloo.append((ts, ts + dur, i, thread))
            recs[i] = (name, e.ts, e.dur, _args(e.args))
        elif role != _CHECKED:
            recs[i] = (name, e.ts, e.dur, _args(e.args))
            comm.setdefault(thread, []).append((ts, ts + dur, i, _COMM_KIND[role]))
    return sel


def _correlations(launches: list[tuple[Any, Any, float]]) -> dict[Any, tuple[Any, float]]:
    """correlation id -> (thread, ts) of the runtime call that launched it (the last one wins)."""
    out: dict[Any, tuple[Any, float]] = {}
    for raw, thread, ts in launches:
        args = _args(raw)
        if not isinstance(args, dict):
            args = {}
        corr = args.get("correlation")
        if corr is not None:
            out[corr] = (thread, ts)
    return out


def _build(sel: _Selected, info: dict, res: ParseResult, file: str) -> ParseResult:
    """Group the selected events into calls, link kernels, resolve each call into a row."""
    rank = _int(info.get("rank"))
    world = _int(info.get("world_size"))
    pgs = _process_groups(info)
    res.meta.update(rank=rank, world_size=world, backend=info.get("backend"),
                    nccl_version=info.get("nccl_version"))
    if pgs:
        res.meta["process_groups"] = [{"name": g, "size": p, "ranks": list(r)} for g, p, r in pgs]
    recs, steps, gloo = sel.recs, sel.steps, sel.gloo

    # --- group nested comm events into calls ------------------------------------------
    calls: list[dict[str, Any]] = []
    thread_calls: dict[Any, list[dict[str, Any]]] = {}
    for thread, evs in sel.comm.items():
        evs.sort(key=lambda t: (t[0], -t[1]))
        stack: list[dict[str, Any]] = []
        mine = thread_calls.setdefault(thread, [])
        for ts, end, i, kind in evs:
            while stack and stack[-1]["end"] < ts:
                stack.pop()
            if stack:
                call = stack[-1]
            else:
                call = {"ts": ts, "end": end, "root": i, "kernels": []}
                calls.append(call)
                mine.append(call)
                stack.append(call)
            call.setdefault(kind, i)
            if kind == "rpc" and "Collective name" in (recs[i][3] or {}):
                call["rpc"] = i if "rpc_named" not in call else call["rpc"]
                call["rpc_named"] = True

    # --- link kernels ------------------------------------------------------------------
    ext_to_call = {}
    for c in calls:
        if "rpc" in c:
            ext = (recs[c["rpc"]][3] or {}).get("External id")
            if ext is not None:
                ext_to_call[ext] = c
    starts = {t: [c["ts"] for c in cs] for t, cs in thread_calls.items()}
    launches: dict[Any, tuple[Any, float]] | None = None
    unlinked = 0
    for k in sel.kernels:
        a = recs[k][3] or {}
        call = ext_to_call.get(a.get("External id"))
        if call is None:
            if launches is None:
                launches = _correlations(sel.launches)
            hit = launches.get(a.get("correlation"))
            if hit is not None and hit[0] in thread_calls:
                cs = thread_calls[hit[0]]
                j = bisect.bisect_right(starts[hit[0]], hit[1]) - 1
                if j >= 0 and cs[j]["ts"] <= hit[1] <= cs[j]["end"]:
                    call = cs[j]
        if call is None:
            unlinked += 1
            continue
        call["kernels"].append(k)

    # --- resolve each call -------------------------------------------------------------
    steps.sort()
    step_starts = [s[0] for s in steps]
    rows = res.rows
    ignored: dict[str, int] = {}
    generations: set[str] = set()
    for call in sorted(calls, key=lambda c: c["ts"]):
        row = _resolve(call, recs, file, generations)
        if isinstance(row, str):
            ignored[row] = ignored.get(row, 0) + 1
            continue
        if row["group_size"] is not None:
            row["group_from"] = "recorded"
        elif _group_from_shapes(row):
            row["group_from"] = "shapes"
        if row["rank"] is None:
            row["rank"] = rank
        j = bisect.bisect_right(step_starts, call["ts"]) - 1
        row["step"] = steps[j][2] if j >= 0 and call["ts"] <= steps[j][1] else None
        ks = call["kernels"]
        row["cpu_start_s"] = call["ts"] * _US
        row["cpu_duration_s"] = (call["end"] - call["ts"]) * _US
        if ks:
            kev = [recs[k] for k in ks]
            row["start_s"] = min(float(k[1]) for k in kev) * _US
            row["duration_s"] = sum(float(k[2]) for k in kev) * _US
            row["kernel"] = kev[0][0].split("(")[0]
            row["link"] = "kernel"
        else:
            row["start_s"] = call["ts"] * _US
            row["duration_s"] = None
            row["kernel"] = None
            row["link"] = None
        row["_call"] = call
        rows.append(row)
    if not rows and gloo:
        rows.extend(_gloo_rows(gloo, recs, file, rank, steps, res))
    elif gloo:
        _match_gloo(rows, gloo, recs, res)
    for r in rows:
        r.pop("_call", None)
    _fill_groups(rows, pgs, world)
    res.meta.update(schema=sorted(generations), steps=len(steps), ignored=ignored,
                    unlinked_kernels=unlinked, events=sel.n_events)
    return res


def _resolve(call: dict, recs: dict, file: str, generations: set[str]) -> dict[str, Any] | str:
    """The canonical row of one call, or the reason it is not a row."""
    c10d = recs[call["c10d"]] if "c10d" in call else None
    rpc = recs[call["rpc"]] if "rpc" in call else None
    annot = recs[call["annot"]] if "annot" in call else None
    row: dict[str, Any] = {"file": file, "rank": None, "op": None, "dtype": None, "in_nelems": None,
                           "out_nelems": None, "group_size": None, "group": None,
                           "source_line": call["root"], "op_name": None}
    rargs = (rpc[3] or {}) if rpc else {}
    if "Collective name" in rargs:
        cname = rargs["Collective name"]
        if not isinstance(cname, str) or cname in KINETO_IGNORED_COLLECTIVES:
            return f"record_param_comms {cname!r}"
        row["op"] = KINETO_COLLECTIVE_NAMES.get(cname, "other")
        row["op_name"] = cname
        for gen, marker, table in KINETO_ARG_GENERATIONS:
            if marker in rargs:
                generations.add(gen)
                for key, col in table.items():
                    if key in rargs:
                        row[col] = rargs[key]
                break
        row.pop("collective", None)
        dt = row["dtype"]
        row["dtype"] = TORCH_DTYPES.get(dt, dt) if isinstance(dt, str) else None
        for col in ("in_nelems", "out_nelems", "group_size", "rank", "seq"):
            if col in row:
                row[col] = _int(row[col])
        if row["group"] is not None:
            row["group"] = str(row["group"])
    elif annot is not None:
        generations.add("annotation-input-dims")
        suffix = annot[0][len("nccl:"):]
        row["op"] = KINETO_ANNOTATION_OPS.get(suffix, "other")
        row["op_name"] = annot[0]
        n, dt = _arg_nelems(annot[3] or {}, 0)
        row["in_nelems"], row["dtype"] = n, dt
    elif c10d is not None:
        generations.add("c10d-input-dims")
        spec = C10D_OPS.get(c10d[0])
        row["op"] = spec[0] if spec else "other"
        row["op_name"] = c10d[0]
    else:
        return "record_param_comms without a collective name"
    if c10d is not None:
        spec = C10D_OPS.get(c10d[0])
        if spec is not None:
            cargs = c10d[3] or {}
            _, oi, ii = spec
            if row["in_nelems"] is None and ii >= 0:
                n, dt = _arg_nelems(cargs, ii)
                row["in_nelems"] = n
                row["dtype"] = row["dtype"] or dt
            if row["out_nelems"] is None and oi >= 0:
                n, dt = _arg_nelems(cargs, oi)
                row["out_nelems"] = n
                row["dtype"] = row["dtype"] or dt
            if ii < 0 and row["in_nelems"] is None:
                row["in_nelems"] = 0
            if oi < 0 and row["out_nelems"] is None:
                row["out_nelems"] = 0
    if row["op"] in ("all_reduce", "broadcast", "reduce"):
        # in = out = the full vector (PyTorch ``record_param_comms``)
        if row["out_nelems"] is None:
            row["out_nelems"] = row["in_nelems"]
        if row["in_nelems"] is None:
            row["in_nelems"] = row["out_nelems"]
    if row["op"] == "barrier":
        row["in_nelems"] = row["in_nelems"] if row["in_nelems"] is not None else 0
        row["out_nelems"] = row["out_nelems"] if row["out_nelems"] is not None else 0
    row["elem_bytes"] = DTYPE_BYTES.get(row["dtype"]) if row["dtype"] else None
    return row


def _match_gloo(
    rows: list[dict], gloo: list[tuple[float, float, int, Any]], recs: dict, res: ParseResult
) -> None:
    """Pair calls without kernels with gloo work annotations in issue order, all-or-nothing."""
    cands = [r for r in rows if r["link"] is None and r["op"] != "barrier"]
    gloo = sorted(gloo)
    ok = len(cands) == len(gloo)
    pairs = []
    if ok:
        for r, (ts, end, i, thread) in zip(cands, gloo, strict=True):
            g = recs[i]
            gop = KINETO_ANNOTATION_OPS.get(g[0][len("gloo:"):], "other")
            if gop != r["op"] and gop not in GLOO_TRANSPORT_OPS.get(r["op"], ()):
                ok = False
                break
            n, dt = _arg_nelems(g[3] or {}, 0)
            if n is not None and r["in_nelems"] is not None and n != r["in_nelems"]:
                ok = False
                break
            if dt is not None and r["dtype"] is not None and dt != r["dtype"]:
                ok = False
                break
            pairs.append((r, ts, end, n, dt, thread))
    res.meta["gloo_matched"] = ok
    if not ok:
        return
    for r, ts, end, n, dt, thread in pairs:
        r["start_s"], r["duration_s"], r["link"] = ts * _US, (end - ts) * _US, "gloo-order"
        r["worker"] = str(thread)
        if r["in_nelems"] is None:
            r["in_nelems"] = n
        if r["dtype"] is None and dt is not None:
            r["dtype"] = dt
            r["elem_bytes"] = DTYPE_BYTES.get(dt)


def _process_groups(info: dict) -> list[tuple[str, int, tuple[int, ...]]]:
    """The process groups of ``distributedInfo.pg_config`` (the groups this rank is a member of):
    (description or name, size, ranks), those that state a size."""
    out = []
    for pg in info.get("pg_config") or []:
        if not isinstance(pg, dict):
            continue
        size = _int(pg.get("pg_size"))
        ranks = pg.get("ranks")
        ranks = tuple(r for r in ranks if isinstance(r, int)) if isinstance(ranks, list) else ()
        if size is None and ranks:
            size = len(ranks)
        if size is None:
            continue
        desc, name = pg.get("pg_desc"), pg.get("pg_name")
        label = desc if isinstance(desc, str) and desc not in ("", "undefined") else f"pg {name}"
        out.append((label, size, ranks))
    return out


def _group_from_shapes(row: dict) -> bool:
    """Group size of an all-gather (output ÷ input) or reduce-scatter (input ÷ output) from its
    element counts (§5: ``_allgather_base`` out = shard × p, ``_reduce_scatter_base`` in = shard × p)."""
    i, o = row["in_nelems"], row["out_nelems"]
    big, small = (o, i) if row["op"] == "all_gather" else (i, o) if row["op"] == "reduce_scatter" else (0, 0)
    if not big or not small or big % small:
        return False
    row["group_size"] = big // small
    return True


def _fill_groups(rows: list[dict], pgs: list[tuple[str, int, tuple[int, ...]]], world: int | None) -> None:
    """Group size and group of the calls that record none, from what the trace does say.

    In order: a gloo worker thread serves one process group (ProcessGroupGloo keeps a pool of worker
    threads per group), so calls run by the worker of a call whose group size is known share it
    (``group_from`` "worker"); else the rank's process groups in ``distributedInfo.pg_config``: one
    group only (the world) gives its size, and groups besides ``default_pg`` all of one size give that
    size (a sub-group job: DDP over a data-parallel group, HSDP's shard and replicate groups):
    ``group_from`` "pg_config". A call whose size matches exactly one of the rank's groups is named
    after it (``group``). Nothing is taken from ``world_size`` when the call says otherwise.
    """
    by_worker: dict[str, set[int]] = {}
    for r in rows:
        if r.get("worker") is not None and r["group_size"] is not None:
            by_worker.setdefault(r["worker"], set()).add(r["group_size"])
    others = {p for g, p, _ in pgs if g != "default_pg" and p != world}
    only = {p for _, p, _ in pgs}
    guess = None
    if len(only) == 1:
        guess = next(iter(only))
    elif len(others) == 1 and all(p == world or g == "default_pg" or p in others for g, p, _ in pgs):
        guess = next(iter(others))
    for r in rows:
        if r["group_size"] is None and r["op"] not in ("send", "recv"):
            known = by_worker.get(r.get("worker"), set())
            if len(known) == 1:
                r["group_size"], r["group_from"] = next(iter(known)), "worker"
            elif guess is not None:
                r["group_size"], r["group_from"] = guess, "pg_config"
        if r["op"] == "all_gather" and r["out_nelems"] is None and r["in_nelems"] is not None \
                and r["group_size"] is not None:
            r["out_nelems"] = r["in_nelems"] * r["group_size"]
        if r["group"] is None and r["group_size"] is not None:
            named = [g for g, p, _ in pgs if p == r["group_size"]]
            if len(named) == 1:
                r["group"] = named[0]


def _gloo_rows(gloo: list[tuple[float, float, int, Any]], recs: dict, file: str, rank: int | None,
               steps: list[tuple[float, float, int]], res: ParseResult) -> list[dict]:
    """Rows from the ``gloo:<op>`` worker events of a trace that has no ``c10d::`` op for them.

    Each worker event names its op and carries one input's ``Input Dims`` and ``Input type``
    (an all-gather's input is the shard). gloo runs a reduce-scatter as an all-reduce of the whole
    input (ProcessGroupGloo), so in such a trace a reduce-scatter reads as an all-reduce: said in
    ``meta["notes"]``.
    """
    rows = []
    step_starts = [s[0] for s in steps]
    for ts, end, i, thread in sorted(gloo):
        name, _, _, args = recs[i]
        op = KINETO_ANNOTATION_OPS.get(name[len("gloo:"):], "other")
        n, dt = _arg_nelems(args or {}, 0)
        j = bisect.bisect_right(step_starts, ts) - 1
        rows.append({
            "file": file, "rank": rank, "op": op, "dtype": dt, "in_nelems": n,
            "out_nelems": n if op in ("all_reduce", "broadcast", "reduce") else None,
            "group_size": None, "group": None, "source_line": i, "op_name": name,
            "elem_bytes": DTYPE_BYTES.get(dt) if dt else None,
            "step": steps[j][2] if j >= 0 and ts <= steps[j][1] else None,
            "cpu_start_s": None, "cpu_duration_s": None, "start_s": ts * _US, "duration_s": (end - ts) * _US,
            "kernel": None, "link": "gloo-only", "worker": str(thread),
        })
    if rows:
        res.meta["notes"] = ["only gloo worker events record the collectives: a reduce-scatter, which gloo "
                             "runs as an all-reduce of its whole input, reads as an all-reduce"]
    return rows
