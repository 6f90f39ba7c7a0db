"""PyTorch profiler (Kineto) Chrome-trace JSON → one row per collective call.

Every schema generation since 2023 (REFERENCE §5), resolved through the tables of
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

Parsed with orjson; the reader caps the decompressed size.
"""

from __future__ import annotations

import ast
import bisect
import math
from typing import Any

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
_US = 1e-6


def parse_bytes(data: bytes, file: str, *, strict: bool = False) -> ParseResult:
    """Parse a whole Kineto trace held in memory."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(file, None, f"not valid JSON ({exc})") from None
    return parse_document(doc, file, strict=strict)


def _dist_info(doc: dict, file: str, strict: bool, res: ParseResult) -> dict:
    info = doc.get("distributedInfo")
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
    res = ParseResult(meta={"format": FORMAT})
    if isinstance(doc, list):
        events, doc = doc, {}
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        events = doc["traceEvents"]
    else:
        raise TraceFormatError(file, None, "not a Chrome trace: no 'traceEvents' list")
    info = _dist_info(doc, file, strict, res)
    rank = _int(info.get("rank"))
    world = _int(info.get("world_size"))
    pg_sizes = {_int(pg.get("pg_size")) for pg in info.get("pg_config") or [] if isinstance(pg, dict)}
    res.meta.update(rank=rank, world_size=world, backend=info.get("backend"),
                    nccl_version=info.get("nccl_version"))

    steps: list[tuple[float, float, int]] = []
    comm: dict[Any, list[tuple[float, float, int, str]]] = {}  # thread -> (ts, end, idx, kind)
    gloo: list[tuple[float, float, int]] = []
    kernels: list[int] = []
    launches: dict[Any, tuple[Any, float]] = {}
    by_ext: dict[Any, list[int]] = {}
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            bad(file, i, "event is not an object", strict, res.skipped)
            continue
        if e.get("ph") != "X":
            continue
        name, cat = e.get("name"), e.get("cat")
        if not isinstance(name, str):
            continue
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        relevant = (name.startswith(("c10d::", "nccl:", "gloo:", "ProfilerStep#", *_KERNEL_PREFIXES))
                    or name == "record_param_comms" or (cat == "cuda_runtime" and "Launch" in name))
        if not relevant:
            continue
        if ts is None or dur is None or dur < 0:
            bad(file, i, f"event {name[:40]!r} without a valid ts/dur", strict, res.skipped)
            continue
        args = e.get("args")
        if not isinstance(args, dict):
            args = {}
        thread = (e.get("pid"), e.get("tid"))
        if cat == "kernel":
            if name.startswith(_KERNEL_PREFIXES):
                kernels.append(i)
                ext = args.get("External id")
                if ext is not None:
                    by_ext.setdefault(ext, []).append(i)
            continue
        if cat == "cuda_runtime":
            corr = args.get("correlation")
            if corr is not None:
                launches[corr] = (thread, ts)
            continue
        if name.startswith("ProfilerStep#"):
            k = _int(name[len("ProfilerStep#"):])
            if k is not None:
                steps.append((ts, ts + dur, k))
            continue
        if name.startswith("gloo:"):
            if cat == "user_annotation":
                gloo.append((ts, ts + dur, i))
            continue
        if name.startswith("nccl:") and cat != "user_annotation":
            continue  # gpu_user_annotation duplicates
        kind = "c10d" if name.startswith("c10d::") else "rpc" if name == "record_param_comms" else "annot"
        comm.setdefault(thread, []).append((ts, ts + dur, i, kind))

    # --- group nested comm events into calls ------------------------------------------
    calls: list[dict[str, Any]] = []
    thread_calls: dict[Any, list[dict[str, Any]]] = {}
    for thread, evs in comm.items():
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
            if kind == "rpc" and "Collective name" in (events[i].get("args") or {}):
                call["rpc"] = i if "rpc_named" not in call else call["rpc"]
                call["rpc_named"] = True

    # --- link kernels ------------------------------------------------------------------
    rpc_to_call = {c["rpc"]: c for c in calls if "rpc" in c}
    ext_to_call = {}
    for c in calls:
        if "rpc" in c:
            ext = (events[c["rpc"]].get("args") or {}).get("External id")
            if ext is not None:
                ext_to_call[ext] = c
    starts = {t: [c["ts"] for c in cs] for t, cs in thread_calls.items()}
    unlinked = 0
    for k in kernels:
        a = events[k].get("args") or {}
        call = ext_to_call.get(a.get("External id"))
        if call is None:
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
    del rpc_to_call

    # --- resolve each call -------------------------------------------------------------
    steps.sort()
    step_starts = [s[0] for s in steps]
    rows = res.rows
    ignored: dict[str, int] = {}
    generations: set[str] = set()
    for call in sorted(calls, key=lambda c: c["ts"]):
        row = _resolve(call, events, file, generations)
        if isinstance(row, str):
            ignored[row] = ignored.get(row, 0) + 1
            continue
        if row["group_size"] is None and len(pg_sizes) == 1 and None not in pg_sizes and row["op"] != "send":
            row["group_size"] = next(iter(pg_sizes))
        if row["rank"] is None:
            row["rank"] = rank
        j = bisect.bisect_right(step_starts, call["ts"]) - 1
        row["step"] = steps[j][2] if j >= 0 and call["ts"] <= steps[j][1] else None
        ks = call["kernels"]
        row["cpu_start_s"] = call["ts"] * _US
        row["cpu_duration_s"] = (call["end"] - call["ts"]) * _US
        if ks:
            kev = [events[k] for k in ks]
            row["start_s"] = min(float(k["ts"]) for k in kev) * _US
            row["duration_s"] = sum(float(k["dur"]) for k in kev) * _US
            row["kernel"] = kev[0]["name"].split("(")[0]
            row["link"] = "kernel"
        else:
            row["start_s"] = call["ts"] * _US
            row["duration_s"] = None
            row["kernel"] = None
            row["link"] = None
        row["_call"] = call
        rows.append(row)
    if gloo:
        _match_gloo(rows, gloo, events, res)
    for r in rows:
        del r["_call"]
    res.meta.update(schema=sorted(generations), steps=len(steps), ignored=ignored,
                    unlinked_kernels=unlinked, events=len(events))
    return res


def _resolve(call: dict, events: list, file: str, generations: set[str]) -> dict[str, Any] | str:
    """The canonical row of one call, or the reason it is not a row."""
    c10d = events[call["c10d"]] if "c10d" in call else None
    rpc = events[call["rpc"]] if "rpc" in call else None
    annot = events[call["annot"]] if "annot" in call else None
    row: dict[str, Any] = {"file": file, "rank": None, "op": None, "dtype": None, "in_nelems": None,
                           "out_nelems": None, "group_size": None, "group": None,
                           "source_line": call["root"], "op_name": None}
    rargs = (rpc.get("args") or {}) if rpc else {}
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
        suffix = annot["name"][len("nccl:"):]
        row["op"] = KINETO_ANNOTATION_OPS.get(suffix, "other")
        row["op_name"] = annot["name"]
        n, dt = _arg_nelems(annot.get("args") or {}, 0)
        row["in_nelems"], row["dtype"] = n, dt
    elif c10d is not None:
        generations.add("c10d-input-dims")
        spec = C10D_OPS.get(c10d["name"])
        row["op"] = spec[0] if spec else "other"
        row["op_name"] = c10d["name"]
    else:
        return "record_param_comms without a collective name"
    if c10d is not None:
        spec = C10D_OPS.get(c10d["name"])
        if spec is not None:
            cargs = c10d.get("args") or {}
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
        # in = out = the full vector (REFERENCE §5)
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
    rows: list[dict], gloo: list[tuple[float, float, int]], events: list, res: ParseResult
) -> None:
    """Pair calls without kernels with gloo work annotations in issue order, all-or-nothing."""
    cands = [r for r in rows if r["link"] is None and r["op"] != "barrier"]
    gloo = sorted(gloo)
    ok = len(cands) == len(gloo)
    pairs = []
    if ok:
        for r, (ts, end, i) in zip(cands, gloo, strict=True):
            g = events[i]
            gop = KINETO_ANNOTATION_OPS.get(g["name"][len("gloo:"):], "other")
            if gop != r["op"] and gop not in GLOO_TRANSPORT_OPS.get(r["op"], ()):
                ok = False
                break
            n, dt = _arg_nelems(g.get("args") or {}, 0)
            if n is not None and r["in_nelems"] is not None and n != r["in_nelems"]:
                ok = False
                break
            if dt is not None and r["dtype"] is not None and dt != r["dtype"]:
                ok = False
                break
            pairs.append((r, ts, end, n, dt))
    res.meta["gloo_matched"] = ok
    if not ok:
        return
    for r, ts, end, n, dt in pairs:
        r["start_s"], r["duration_s"], r["link"] = ts * _US, (end - ts) * _US, "gloo-order"
        if r["in_nelems"] is None:
            r["in_nelems"] = n
        if r["dtype"] is None and dt is not None:
            r["dtype"] = dt
            r["elem_bytes"] = DTYPE_BYTES.get(dt)
