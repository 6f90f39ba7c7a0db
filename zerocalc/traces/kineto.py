"""PyTorch profiler (Kineto) Chrome-trace JSON → one row per collective call.

Every schema generation since 2023 (PyTorch ``record_param_comms``), resolved through the tables of
:mod:`zerocalc.traces.schema`:

* a call is the outermost of the nested CPU events ``c10d::<op>`` ⊃ ``record_param_comms``
  ⊃ ``nccl:<op>`` on one thread;
* sizes come from the ``record_param_comms`` arguments (``In msg nelems`` ..., or
  ``In msg size`` in late 2023), else from the ``Input Dims`` of the ``nccl:<op>``
  annotation (pre-2023 traces), else from the ``Input Dims`` of the ``c10d::`` op by
  its signature (gloo). A ``TensorList`` argument gives sizes but no dtype: dtype NA;
* GPU kernels (``ncclKernel_*`` up to NCCL 2.18, ``ncclDevKernel_*`` after; the symmetric kernels of
  2.27 on, ``ncclSymDevKernel_*`` / ``ncclSymkDevKernel_*``) are linked by
  ``External id`` or, in old traces, by ``correlation`` → ``cudaLaunch*`` → the call that
  encloses the launch on that thread; their time is ``start_s``/``duration_s``;
* over gloo, the ``gloo:<op>`` annotations of the worker threads are matched to the calls
  in issue order, only when the two sequences agree in length, op and size everywhere
  (``link`` column says so); they give the transport time and the element type;
* ``wait`` entries are dropped; ``ProfilerStep#k`` annotations give ``step``;
* a reduction or an all-gather nested in an op the autograd engine differentiates, and in no node of the
  backward, ran in a forward pass: ``forward_op`` names that op; ``in_shape`` is the shape of the one
  tensor a ``c10d::`` reduction reduces or an all-gather gathers from, where it has two dimensions or more
  (:mod:`~zerocalc.traces.kineto_forward`).

:func:`parse_bytes` decodes with msgspec only the fields it reads, into compact objects, and
keeps only the events the table uses (benchmarks/bench_kineto.py); anything else falls back to
a full orjson decode. The reader caps the decompressed size.

The stages, one module each: the events the table uses (:mod:`~zerocalc.traces.kineto_events`),
the calls they make and their rows (:mod:`~zerocalc.traces.kineto_calls`), the reductions and all-gathers
of a forward pass (:mod:`~zerocalc.traces.kineto_forward`), the gloo annotations
(:mod:`~zerocalc.traces.kineto_gloo`) and the groups of calls that record none
(:mod:`~zerocalc.traces.kineto_groups`).
"""

from __future__ import annotations

import ast
from typing import Any

import msgspec
import orjson

from zerocalc.errors import TraceFormatError
from zerocalc.traces.kineto_calls import _build
from zerocalc.traces.kineto_events import (
    _DECODER,
    _args,
    _Event,
    _Invalid,
    _maybe_used,
    _NameFilter,
    _select,
    _utf8,
)
from zerocalc.traces.kineto_forward import forward_calls
from zerocalc.traces.kineto_recompute import backward_calls
from zerocalc.traces.records import ParseResult, bad

FORMAT = "kineto"


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
        _gpus(_args(trace.deviceProperties), res)
        events = trace.traceEvents
        del trace
        sel = _select(_maybe_used(events), len(events), file, strict, res)
        forward, (backward, again) = forward_calls(events, sel), backward_calls(events, sel)
        del events  # drop the decoded events before building anything else
        return _build(sel, info, res, file, forward, again, backward)
    except (msgspec.DecodeError, _Invalid):
        pass
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(file, None, f"not valid JSON ({exc})") from None
    return parse_document(doc, file, strict=strict)


def _dist_info(info: Any, file: str, strict: bool, res: ParseResult) -> dict:
    if isinstance(info, str):  # some exporters write the Python repr of the dict
        try:
            info = ast.literal_eval(info)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            bad(file, None, "distributedInfo is a string that is not a literal dict", strict, res.skipped)
            info = None
    return info if isinstance(info, dict) else {}


def _gpus(props: Any, res: ParseResult) -> None:
    """The names of the GPUs Kineto's ``deviceProperties`` lists (``Tesla V100-SXM2-32GB``), in
    ``res.meta["gpus"]`` where it lists any; a malformed list states none."""
    names = sorted({d["name"] for d in props if isinstance(d, dict) and isinstance(d.get("name"), str)}
                   if isinstance(props, list) else ())
    if names:
        res.meta["gpus"] = names


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
    _gpus(doc.get("deviceProperties"), res)
    maybe = _NameFilter()
    used: list[tuple[int, _Event | None]] = []  # the events _select may use, as _Event; None = not an object
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            used.append((i, None))
            continue
        name = e.get("name")
        if e.get("ph") == "X" and type(name) is str and maybe[name]:
            used.append((i, _Event(name=name, cat=e.get("cat"), ts=e.get("ts"), dur=e.get("dur"),
                                   pid=e.get("pid"), tid=e.get("tid"), args=e.get("args"))))
    sel = _select(used, len(events), file, strict, res)
    backward, again = backward_calls(events, sel, decoded=True)
    return _build(sel, info, res, file, forward_calls(events, sel, decoded=True), again, backward)
