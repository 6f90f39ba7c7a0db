"""The gloo work annotations of a Kineto trace (``gloo:<op>`` on the worker threads): matched to
the calls in issue order where the two sequences agree in length, op and size everywhere, or, where
the trace records no ``c10d::`` op for them, read as the calls themselves.

A process group's work queue is first in, first out, but its worker threads (two by default,
``ProcessGroupGloo``'s ``threads``) each take the next item and open its annotation themselves, so
two calls issued together can open theirs in the other order (a microsecond apart). Where the start
order does not pair every call, each call takes the first annotation of its op, size and element type
among the next ones still unpaired, as many as the trace has worker threads, and never one that begins
before the call itself."""

from __future__ import annotations

from typing import Any

from zerocalc.traces.kineto_events import _US, _arg_nelems, step_at
from zerocalc.traces.records import ParseResult
from zerocalc.traces.schema import DTYPE_BYTES, GLOO_TRANSPORT_OPS, KINETO_ANNOTATION_OPS


def _match_gloo(
    rows: list[dict], gloo: list[tuple[float, float, int, Any]], recs: dict, res: ParseResult
) -> None:
    """Pair calls without kernels with gloo work annotations in issue order, all-or-nothing: in start
    order, else within the worker threads' reach (the module's docstring). Barriers aside: they carry
    nothing to read, and only some releases annotate their work (``gloo:barrier`` in torch 2.13)."""
    cands = [r for r in rows if r["link"] is None and r["op"] != "barrier"]
    gloo = sorted(g for g in gloo if KINETO_ANNOTATION_OPS.get(recs[g[2]][0][len("gloo:"):]) != "barrier")
    pairs = None
    if len(cands) == len(gloo):
        pairs = _in_order(cands, gloo, recs)
        if pairs is None:
            pairs = _within_reach(cands, gloo, recs, len({t for *_, t in gloo}))
    res.meta["gloo_matched"] = pairs is not None
    if pairs is None:
        return
    for r, ts, end, n, dt, thread in pairs:
        # the call keeps its own start (the order the rank issued it in, which two workers may open in the
        # other order) and takes the work's duration
        r["worker_start_s"], r["duration_s"], r["link"] = ts * _US, (end - ts) * _US, "gloo-order"
        r["worker"] = str(thread)
        if r["in_nelems"] is None:
            r["in_nelems"] = n
        if r["dtype"] is None and dt is not None:
            r["dtype"] = dt
            r["elem_bytes"] = DTYPE_BYTES.get(dt)


def _fits(r: dict, g: tuple) -> tuple | None:
    """``(elements, dtype)`` of the gloo annotation ``g`` (its record) where it can be call ``r``'s work
    (its op, or the transport gloo runs it by; its size and element type where both are recorded)."""
    gop = KINETO_ANNOTATION_OPS.get(g[0][len("gloo:"):], "other")
    if gop != r["op"] and gop not in GLOO_TRANSPORT_OPS.get(r["op"], ()):
        return None
    n, dt = _arg_nelems(g[3] or {}, 0)
    own = r["out_nelems"] if r["op"] == "recv" else r["in_nelems"]  # a receive's tensor is its output
    if n is not None and own is not None and n != own:
        return None
    if dt is not None and r["dtype"] is not None and dt != r["dtype"]:
        return None
    return n, dt


def _in_order(cands: list[dict], gloo: list, recs: dict) -> list | None:
    """The calls paired with the annotations in start order, or ``None`` where one does not fit."""
    pairs = []
    for r, (ts, end, i, thread) in zip(cands, gloo, strict=True):
        fit = _fits(r, recs[i])
        if fit is None:
            return None
        pairs.append((r, ts, end, *fit, thread))
    return pairs


def _within_reach(cands: list[dict], gloo: list, recs: dict, threads: int) -> list | None:
    """Each call (in issue order) paired with the first annotation that fits it among the next
    ``threads`` unpaired ones (in start order) that do not begin before it, or ``None`` where a call
    finds none."""
    free = list(gloo)
    pairs = []
    for r in cands:
        begun = r.get("cpu_start_s")
        for j, (ts, end, i, thread) in enumerate(free[:threads]):
            fit = _fits(r, recs[i])
            if fit is not None and (begun is None or ts * _US >= begun):
                pairs.append((r, ts, end, *fit, thread))
                del free[j]
                break
        else:
            return None
    return pairs


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
        rows.append({
            "file": file, "rank": rank, "op": op, "dtype": dt, "in_nelems": n,
            "out_nelems": n if op in ("all_reduce", "broadcast", "reduce") else None,
            "group_size": None, "group": None, "source_line": i, "op_name": name,
            "elem_bytes": DTYPE_BYTES.get(dt) if dt else None,
            "step": step_at(step_starts, steps, ts),
            "cpu_start_s": None, "cpu_duration_s": None, "start_s": ts * _US, "duration_s": (end - ts) * _US,
            "kernel": None, "link": "gloo-only", "worker": str(thread),
        })
    if rows:
        res.meta["notes"] = ["only gloo worker events record the collectives: a reduce-scatter, which gloo "
                             "runs as an all-reduce of its whole input, reads as an all-reduce"]
    return rows
