"""Reductions and all-gathers a Kineto trace runs inside a forward pass, from the ops that enclose each
call.

An op the autograd engine will differentiate records the ``Sequence number`` its node takes
(``torch/csrc/autograd/function.h``, ``sequence_nr``; the profiler writes it in the op's ``args``), an
``autograd.Function``'s ``apply`` as much as an ATen op. A reduction nested inside such an op, and inside
no node of the backward, runs in the forward: the all-reduce of a tensor-parallel block's output
(Megatron-LM's ``_ReduceFromModelParallelRegion``, DTensor's ``Redistribute`` under ``RowwiseParallel``),
a sequence-parallel reduce-scatter, a vocabulary-parallel cross-entropy's all-reduces. It reduces
activations; no data-parallel scheme reduces a gradient there, as the backward makes them. An all-gather
there gathers activations where sequence parallelism runs it (Megatron-LM's
``_GatherFromSequenceParallelRegion``, DTensor's ``Redistribute`` under ``ColwiseParallel(input_layouts=
Shard(...))``), parameters where a scheme gathers them through an autograd op (DTensor's, in torchtitan's
SimpleFSDP); FSDP's and ZeRO-3's gathers run in module hooks, outside any such op. The reader marks both;
the check tells them apart by the group (:mod:`zerocalc.validate.activations`). A reduction
in the backward runs inside one of the engine's node events (``autograd::engine::evaluate_function:``;
a hook's inside the node that runs it, DDP's and FSDP1's inside an ``AccumulateGrad``), or after the
backward, where no op encloses it that records a sequence number, or in a callback the engine runs once
the nodes are done, in no node but inside an event that names the backward (FSDP2's
``FSDP::root_post_backward_callback``, whose ``Redistribute`` all-reduces the gradients of parameters
tensor parallelism replicates).

A call's own tensor tells its backward half (:func:`input_shape`): a tensor-parallel block reduces
in the backward the gradient of its input, a tensor of the very shape its forward reduces where the block
keeps its width (a transformer's MLP or attention: ``[batch, sequence, hidden]`` both ways), where a
data-parallel scheme reduces gradients flattened into buckets or shaped as parameters (and gathers
parameters flat, as FSDP and ZeRO-3 do).

The profiler writes a thread's CPU ops in the order they start, so the ops enclosing a call are found
among the :data:`WINDOW` events before it; one further back (an op holding more events before the call
than that) is not seen, and the call is not taken for a forward one.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec

from zerocalc.traces.kineto_events import BACKWARD_PREFIX, _args, _Invalid, _Selected
from zerocalc.traces.schema import C10D_OPS, KINETO_ANNOTATION_OPS, REDUCTION_OPS

#: How many events before a call are searched for the ops that enclose it.
WINDOW = 128
#: The ops whose calls are read: reductions and all-gathers.
MARKED_OPS = (*REDUCTION_OPS, "all_gather")


def call_names(ops: tuple[str, ...]) -> frozenset[str]:
    """The names of the events of calls of ``ops``: their ``c10d::`` ops and ``nccl:`` annotations."""
    return frozenset([*(n for n, (op, *_) in C10D_OPS.items() if op in ops),
                      *("nccl:" + n for n, op in KINETO_ANNOTATION_OPS.items() if op in ops)])


_NAMES = call_names(MARKED_OPS)
_SEQ = "Sequence number"
_SEQ_BYTES = b'"Sequence number"'
EPS = 1e-3  # µs: a child's end, computed from its own ts and dur, may pass its parent's by a rounding


def _struct_fields(e: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
    """(name, pid, tid, ts, dur, args) of a decoded event of the fast path (``_Event``; any other phase's
    name is None)."""
    name = e.name
    if name is None:
        return None, None, None, None, None, None
    return name, e.pid, e.tid, e.ts, e.dur, e.args


def _dict_fields(e: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
    """The same of an event decoded in full (a dict; anything else, or another phase, has no name)."""
    if not isinstance(e, dict) or e.get("ph") != "X":
        return None, None, None, None, None, None
    return e.get("name"), e.get("pid"), e.get("tid"), e.get("ts"), e.get("dur"), e.get("args")


def _numbered(args: Any) -> bool:
    """Whether an op's ``args`` record a sequence number (undecoded: decoded only where they name one)."""
    if type(args) is msgspec.Raw:
        if _SEQ_BYTES not in bytes(args):
            return False
        try:
            args = _args(args)
        except _Invalid:  # args that do not decode record nothing
            return False
    seq = args.get(_SEQ) if isinstance(args, dict) else None
    return type(seq) is int and seq >= 0


def forward_calls(events: Sequence[Any], sel: _Selected, decoded: bool = False) -> dict[int, str]:
    """The events of reductions and all-gathers (``c10d::`` ops and ``nccl:`` annotations of an all-reduce,
    reduce-scatter, reduce or all-gather) that run inside a forward pass, by index, each with the name of
    the innermost op around it that records a sequence number (``Redistribute``,
    ``_ReduceFromModelParallelRegion``); ``events``: the trace's events, as the fast path decodes them
    (``decoded``: dicts, as :func:`~zerocalc.traces.kineto.parse_document` has them)."""
    fields: Callable[[Any], tuple] = _dict_fields if decoded else _struct_fields
    nodes = _outer_nodes(sel)
    out: dict[int, str] = {}
    for thread, evs in sel.comm.items():
        spans = nodes.get(thread, ([], []))
        for ts, end, i, _ in evs:
            if sel.recs[i][0] not in _NAMES or _inside(spans, ts, end):
                continue
            if op := _forward_op(events, i, thread, ts, end, fields):
                out[i] = op
    return out


def _forward_op(events: Sequence[Any], i: int, thread: tuple, ts: float, end: float,
                fields: Callable[[Any], tuple]) -> str | None:
    """The innermost op recording a sequence number that encloses event ``i`` (on ``thread``, from ``ts`` to
    ``end``) among the :data:`WINDOW` events before it, where no node of the backward encloses it there, nor
    an event a backward's hook names so (:func:`_after_backward`)."""
    found = None
    for name, _, args in enclosing(events, i, thread, ts, end, fields):
        if name.startswith(BACKWARD_PREFIX) or _after_backward(name):
            return None
        if found is None and _numbered(args):
            found = name
    return found


def enclosing(events: Sequence[Any], i: int, thread: tuple, ts: float, end: float,
              fields: Callable[[Any], tuple]) -> Iterator[tuple[str, float, Any]]:
    """The ops on ``thread`` that enclose event ``i`` (from ``ts`` to ``end``) among the :data:`WINDOW` events
    before it, the innermost first, each as (name, start, args)."""
    for j in range(i - 1, max(-1, i - 1 - WINDOW), -1):
        name, pid, tid, ets, dur, args = fields(events[j])
        if type(name) is not str or (pid, tid) != thread:
            continue
        if not (isinstance(ets, int | float) and isinstance(dur, int | float)):
            continue
        if ets > ts + EPS or ets + dur < end - EPS:
            continue  # not an op enclosing the call
        yield name, ets, args


def _after_backward(name: str) -> bool:
    """Whether an event's name says a backward runs it: the callbacks the autograd engine runs once a
    backward's nodes are done run in no node (FSDP2's ``FSDP::root_post_backward_callback``, and inside it
    ``FSDP::post_backward_reshard``, which redistributes the gradients of parameters tensor parallelism
    replicates, an all-reduce inside ``Redistribute``, an op that records a sequence number)."""
    return "backward" in name.lower()


def _outer_nodes(sel: _Selected) -> dict[Any, tuple[list[float], list[float]]]:
    """Per thread, the starts and ends of the outermost node events of the backward (an AccumulateGrad's
    too: the hooks run inside it), in order."""
    by_thread: dict[Any, list[tuple[float, float]]] = {}
    for ts, end, thread, *_ in (*sel.backward, *sel.leaves):
        by_thread.setdefault(thread, []).append((ts, end))
    out = {}
    for thread, spans in by_thread.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        starts, ends = [], []
        for ts, end in spans:
            if ends and ts <= ends[-1]:
                continue  # nested in the one before
            starts.append(ts)
            ends.append(end)
        out[thread] = (starts, ends)
    return out


def _inside(spans: tuple[list[float], list[float]], ts: float, end: float) -> bool:
    """Whether one of the outermost node spans (starts, ends) holds ``ts`` to ``end``."""
    starts, ends = spans
    j = bisect.bisect_right(starts, ts + EPS) - 1
    return j >= 0 and ends[j] >= end - EPS


def input_shape(name: str, args: Any) -> str | None:
    """The shape of the one tensor a ``c10d::`` reduction ``name`` reduces, or an all-gather gathers from
    (its input: a rank's shard), from its ``Input Dims`` (``"8x192"``), where it has at least two
    dimensions; None otherwise (a flat bucket or shard, a list of several tensors, shapes not recorded)."""
    spec = C10D_OPS.get(name)
    dims = args.get("Input Dims") if isinstance(args, dict) else None
    if spec is None or spec[0] not in MARKED_OPS or not isinstance(dims, list) or len(dims) <= spec[2]:
        return None
    d = dims[spec[2]]
    if isinstance(d, list) and len(d) == 1 and isinstance(d[0], list):
        d = d[0]  # a list of one tensor
    if not isinstance(d, list) or len(d) < 2 or not all(type(x) is int for x in d):
        return None
    return "x".join(map(str, d))
