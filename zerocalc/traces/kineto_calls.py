"""The calls of a Kineto trace from its selected events: nested CPU events on one thread grouped
into calls, GPU kernels linked to them, each call resolved into a canonical row (op, sizes and
dtype by the schema generation it records, step, timing), then the gloo annotations matched and the
groups filled in (:mod:`~zerocalc.traces.kineto_gloo`, :mod:`~zerocalc.traces.kineto_groups`).
"""

from __future__ import annotations

import bisect
from typing import Any

from zerocalc.traces.kineto_backward import backward_passes, optimizer_spans
from zerocalc.traces.kineto_events import (
    _US,
    _arg_nelems,
    _args,
    _int,
    _Selected,
    bucket_copy_elements,
    chunk_cat_sizes,
    pad_sizes,
    step_at,
)
from zerocalc.traces.kineto_forward import input_shape
from zerocalc.traces.kineto_gloo import _gloo_rows, _match_gloo
from zerocalc.traces.kineto_groups import (
    _fill_groups,
    _group_from_shapes,
    _process_groups,
    _worker_groups,
    ranks_recorded,
)
from zerocalc.traces.records import ParseResult
from zerocalc.traces.schema import (
    C10D_OPS,
    DTYPE_BYTES,
    KINETO_ANNOTATION_OPS,
    KINETO_ARG_GENERATIONS,
    KINETO_COLLECTIVE_NAMES,
    KINETO_IGNORED_COLLECTIVES,
    TORCH_DTYPES,
    closes_group,
)


def _build(sel: _Selected, info: dict, res: ParseResult, file: str, forward: dict[int, str] | None = None,
           recompute: dict[int, str] | None = None, backward: dict[int, str] | None = None) -> ParseResult:
    """Group the selected events into calls, link kernels, resolve each call into a row; ``forward``: the
    events of reductions run inside a forward pass, by index, each with the op around it
    (:mod:`~zerocalc.traces.kineto_forward`); ``recompute``: the events of all-gathers a reentrant
    checkpoint's recompute ran, with its node's name, ``backward`` those of all-gathers run inside a node of
    the backward, with the innermost node's name (:mod:`~zerocalc.traces.kineto_recompute`)."""
    rank, world, pgs = _trace_meta(info, res)
    calls, thread_calls = _group_calls(sel)
    unlinked = _link_kernels(sel, calls, thread_calls)
    sel.steps.sort()
    after = _after_optimizer(sel)  # before the optimizer's steps stand in for missing ProfilerSteps
    if not sel.steps and (steps := optimizer_spans(sel.optimizer, sel.backward)):
        sel.steps.extend(steps)  # no ProfilerStep: the optimizer's steps mark them
        res.meta["steps_from"] = "optimizer"
    ignored, generations = _resolve_calls(calls, sel, rank, file, res.rows, forward or {}, after, recompute,
                                          backward)
    rows, gloo = res.rows, sel.gloo
    if not rows and gloo:
        rows.extend(_gloo_rows(gloo, sel.recs, file, rank, sel.steps, res))
    elif gloo:
        _match_gloo(rows, gloo, sel.recs, res)
    _fill_groups(rows, pgs, world)
    if gloo:
        _worker_groups(rows, pgs, {str(t): t[1] for *_, t in gloo if type(t[1]) is int})
    res.meta.update(schema=sorted(generations), steps=len(sel.steps), ignored=ignored,
                    unlinked_kernels=unlinked, events=sel.n_events)
    if passes := backward_passes(sel.backward, sel.steps):
        res.meta["backward_passes"] = passes  # ProfilerStep number -> backward passes begun in it
    if pairs := {p for raw in sel.chunk_cats if (p := chunk_cat_sizes(raw))}:
        res.meta["fsdp_padding"] = sorted(pairs)  # (padded, own) elements of the units FSDP2 reduce-scatters
    elif sel.pads and (pairs := _scattered_pads(sel.pads, rows)):
        res.meta["fsdp1_padding"] = pairs  # (padded, own) elements of flat gradients FSDP1 reduce-scatters
    if sel.bucket_copies and None not in (copied := [bucket_copy_elements(raw) for raw in sel.bucket_copies]):
        res.meta["ddp_bucket_elements"] = sum(copied)  # the gradient elements DDP copied into its buckets
    if sel.optimizer and sel.steps:
        res.meta["optimizer_steps"] = _steps_holding([ts for ts, _ in sel.optimizer], sel.steps)
        res.meta["profiler_steps"] = [min(s[2] for s in sel.steps), max(s[2] for s in sel.steps)]
    return res


def _scattered_pads(pads: list[Any], rows: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(padded, own) of the ``aten::pad`` calls (:func:`pad_sizes`) whose padded vector is as long as a
    reduce-scatter's input of the same file: FSDP1's flat gradients padded to a multiple of the ranks; a
    model's own pads of other sizes are left out."""
    scattered = {r.get("in_nelems") for r in rows if r.get("op") == "reduce_scatter"}
    return sorted({p for raw in pads if (p := pad_sizes(raw)) and p[0] in scattered})


def _steps_holding(starts: list[float], steps: list[tuple[float, float, int]]) -> list[int]:
    """The numbers of the (sorted) ``steps`` within which one of ``starts`` falls, in order."""
    begins = [s[0] for s in steps]
    return sorted({k for ts in starts if (k := step_at(begins, steps, ts)) is not None})


def _trace_meta(info: dict, res: ParseResult) -> tuple[int | None, int | None,
                                                       list[tuple[str, int, tuple[int, ...], str | None]]]:
    """The rank, world size and process groups of ``distributedInfo``, also put in ``res.meta``."""
    rank = _int(info.get("rank"))
    world = _int(info.get("world_size"))
    pgs = _process_groups(info)
    res.meta.update(rank=rank, world_size=world, backend=info.get("backend"),
                    nccl_version=info.get("nccl_version"))
    if pgs:
        res.meta["process_groups"] = [{"name": g, "size": p, "ranks": list(r)} for g, p, r, _ in pgs]
    return rank, world, pgs


def _group_calls(sel: _Selected) -> tuple[list[dict[str, Any]], dict[Any, list[dict[str, Any]]]]:
    """The calls, each the outermost of nested comm events on one thread, in order of their start
    per thread; and each thread's calls."""
    recs = sel.recs
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
    return calls, thread_calls


def _link_kernels(sel: _Selected, calls: list[dict[str, Any]],
                  thread_calls: dict[Any, list[dict[str, Any]]]) -> int:
    """Each GPU kernel added to its call's ``kernels``: by ``External id``, else by ``correlation``
    to the launch and the call that encloses it on that thread; the number left unlinked."""
    recs = sel.recs
    ext_to_call = {}
    for c in calls:
        if "rpc" in c:
            ext = _id((recs[c["rpc"]][3] or {}).get("External id"))
            if ext is not None:
                ext_to_call[ext] = c
    starts = {t: [c["ts"] for c in cs] for t, cs in thread_calls.items()}
    launches: dict[Any, tuple[Any, float]] | None = None
    unlinked = 0
    for k in sel.kernels:
        a = recs[k][3] or {}
        call = ext_to_call.get(_id(a.get("External id")))
        if call is None:
            if launches is None:
                launches = _correlations(sel.launches)
            hit = launches.get(_id(a.get("correlation")))
            if hit is not None and hit[0] in thread_calls:
                cs = thread_calls[hit[0]]
                j = bisect.bisect_right(starts[hit[0]], hit[1]) - 1
                if j >= 0 and cs[j]["ts"] <= hit[1] <= cs[j]["end"]:
                    call = cs[j]
        if call is None:
            unlinked += 1
            continue
        call["kernels"].append(k)
    return unlinked


def _after_optimizer(sel: _Selected):
    """Whether a time falls after an optimizer step (the end of an ``Optimizer.step#`` annotation that no
    other holds: ZeroRedundancyOptimizer's broadcasts follow its inner optimizer's step inside its own)
    within the ProfilerStep that holds that end, with no node of a backward begun in between (a function of
    the time); never where the trace marks no ProfilerStep."""
    if not sel.steps or not sel.optimizer:
        return lambda ts: False
    outer: list[list[float]] = []
    for ts, end in sorted(sel.optimizer):
        if outer and ts <= outer[-1][1]:
            outer[-1][1] = max(outer[-1][1], end)
        else:
            outer.append([ts, end])
    bounds = sorted([(end, True) for _, end in outer] + [(ts, False) for ts, _ in outer]
                    + [(b[0], False) for b in sel.backward] + [(s[0], False) for s in sel.steps])
    times = [b[0] for b in bounds]

    def after(ts: float) -> bool:
        j = bisect.bisect_right(times, ts) - 1
        return j >= 0 and bounds[j][1]

    return after


def _resolve_calls(calls: list[dict[str, Any]], sel: _Selected, rank: int | None, file: str,
                   rows: list[dict[str, Any]], forward: dict[int, str],
                   after=lambda ts: False, recompute: dict[int, str] | None = None,
                   backward: dict[int, str] | None = None) -> tuple[dict[str, int], set[str]]:
    """Each call, in order of its start, resolved into a row appended to ``rows``, with its group's
    source, rank, step, timing (its kernels', else its CPU span's) and, where it ran in a forward pass (its
    c10d op or annotation among ``forward``), the op around it in ``forward_op``, and the shape its c10d
    op reduces or gathers from in ``in_shape``; where it gathered in a reentrant checkpoint's recompute (its
    c10d op or annotation among ``recompute``: :mod:`~zerocalc.traces.kineto_recompute`), that node's name in
    ``recompute_op``; where it gathered inside a node of the backward (among ``backward``), the innermost
    node's name in ``backward_op``; ``after_optimizer`` True where it began after the
    optimizer's step in its ProfilerStep (``after``: :func:`_after_optimizer`); the calls that are not rows
    counted by reason, and the schema generations met."""
    recs, steps = sel.recs, sel.steps
    step_starts = [s[0] for s in steps]
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
        row["step"] = step_at(step_starts, steps, call["ts"])
        row["forward_op"] = forward.get(call.get("c10d"), forward.get(call.get("annot")))
        if recompute:
            row["recompute_op"] = recompute.get(call.get("c10d"), recompute.get(call.get("annot")))
        if backward:
            row["backward_op"] = backward.get(call.get("c10d"), backward.get(call.get("annot")))
        row["after_optimizer"] = True if after(call["ts"]) else None
        c10d = recs[call["c10d"]] if "c10d" in call else None  # (name, ts, dur, args)
        row["in_shape"] = input_shape(c10d[0], c10d[3]) if c10d is not None else None
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
        rows.append(row)
    return ignored, generations


def _correlations(launches: list[tuple[Any, Any, float]]) -> dict[Any, tuple[Any, float]]:
    """correlation id -> (thread, ts) of the runtime call that launched it (the last one wins)."""
    out: dict[Any, tuple[Any, float]] = {}
    for raw, thread, ts in launches:
        args = _args(raw)
        if not isinstance(args, dict):
            args = {}
        corr = _id(args.get("correlation"))
        if corr is not None:
            out[corr] = (thread, ts)
    return out


def _id(value: Any) -> int | float | str | None:
    """An ``External id`` or ``correlation`` as a key: a number or a string; anything else (a list, an
    object: a malformed trace) links nothing."""
    return value if isinstance(value, int | float | str) else None


def _resolve(call: dict, recs: dict, file: str, generations: set[str]) -> dict[str, Any] | str:
    """The canonical row of one call, or the reason it is not a row: its op, sizes and dtype from what
    the call records (:func:`_identify`), sizes left out filled from the c10d op's inputs
    (:func:`_c10d_sizes`) and from the op's own rules (:func:`_implied_sizes`), then the element width."""
    c10d = recs[call["c10d"]] if "c10d" in call else None
    row: dict[str, Any] = {"file": file, "rank": None, "op": None, "dtype": None, "in_nelems": None,
                           "out_nelems": None, "group_size": None, "group": None,
                           "source_line": call["root"], "op_name": None}
    why = _identify(row, call, recs, c10d, generations)
    if why:
        return why
    if c10d is not None:
        _c10d_sizes(row, c10d)
    _implied_sizes(row)
    row["elem_bytes"] = DTYPE_BYTES.get(row["dtype"]) if row["dtype"] else None
    return row


def _identify(row: dict[str, Any], call: dict, recs: dict, c10d, generations: set[str]) -> str:
    """Fill ``row``'s op and what the call records, from the first it has of: ``record_param_comms``'
    arguments (by schema generation), an ``nccl:`` annotation, a c10d op; the generation read goes into
    ``generations``. '' when done, else the reason the call is not a row."""
    rpc = recs[call["rpc"]] if "rpc" in call else None
    annot = recs[call["annot"]] if "annot" in call else None
    rargs = (rpc[3] or {}) if rpc else {}
    if "Collective name" in rargs:
        return _from_record_param_comms(row, rargs, generations)
    if annot is not None:
        generations.add("annotation-input-dims")
        suffix = annot[0][len("nccl:"):]
        if closes_group(suffix):  # the entry closing a group of coalesced calls: no call of its own
            return f"annotation {annot[0]!r}"
        row["op"] = KINETO_ANNOTATION_OPS.get(suffix, "other")
        row["op_name"] = annot[0]
        n, dt = _arg_nelems(annot[3] or {}, 0)
        row["in_nelems"], row["dtype"] = n, dt
        return ""
    if c10d is not None:
        generations.add("c10d-input-dims")
        spec = C10D_OPS.get(c10d[0])
        row["op"] = spec[0] if spec else "other"
        row["op_name"] = c10d[0]
        return ""
    return "record_param_comms without a collective name"


def _from_record_param_comms(row: dict[str, Any], rargs: dict, generations: set[str]) -> str:
    """``row`` from the arguments of ``record_param_comms`` in the first schema generation whose marker
    they hold (:data:`~zerocalc.traces.schema.KINETO_ARG_GENERATIONS`); '' or why it is not a row."""
    cname = rargs["Collective name"]
    if not isinstance(cname, str) or cname in KINETO_IGNORED_COLLECTIVES or closes_group(cname):
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
    row["group_ranks"] = ranks_recorded(rargs, row["group_size"])
    if row["group"] is not None:
        row["group"] = str(row["group"])
    return ""


def _c10d_sizes(row: dict[str, Any], c10d) -> None:
    """Sizes (and dtype) the call did not record, from its c10d op's input and output tensors
    (:data:`~zerocalc.traces.schema.C10D_OPS`: the argument index of each, -1 for none: 0 elements)."""
    spec = C10D_OPS.get(c10d[0])
    if spec is None:
        return
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


def _implied_sizes(row: dict[str, Any]) -> None:
    """The side an op's rule implies: in = out = the full vector for all-reduce, broadcast and reduce
    (PyTorch ``record_param_comms``); 0 elements for a barrier."""
    if row["op"] in ("all_reduce", "broadcast", "reduce"):
        if row["out_nelems"] is None:
            row["out_nelems"] = row["in_nelems"]
        if row["in_nelems"] is None:
            row["in_nelems"] = row["out_nelems"]
    if row["op"] == "barrier":
        row["in_nelems"] = row["in_nelems"] if row["in_nelems"] is not None else 0
        row["out_nelems"] = row["out_nelems"] if row["out_nelems"] is not None else 0
