"""Backward passes per profiler step, from the autograd engine's events in a Kineto trace.

The autograd engine records each node it runs as a CPU op ``autograd::engine::evaluate_function: <Node>``
(``torch/csrc/autograd/engine.cpp``: ``evaluate_function`` under ``RECORD_FUNCTION``), with the node's
``Sequence number``: a per-thread counter that every differentiable op of the forward takes and advances
(``torch/csrc/autograd/function.h``, ``sequence_nr``; ``AccumulateGrad`` has none). A backward pass runs
the nodes of one forward's graph, all numbered below its root (the loss, made last); the next
micro-batch's forward makes nodes numbered above every earlier one. So a node numbered above every node
run before it opens a new backward pass, in a trace of one thread or of several (the nodes of a CUDA
graph run on the device's autograd thread), in plain, gradient-accumulation and pipeline schedules alike.
A backward called inside a node (reentrant activation checkpointing) runs nested in that node's event on
the same thread and is part of its pass.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any

import msgspec
import orjson

from zerocalc.traces.kineto_events import step_at

_INF = float("inf")


def _decoded(args: list[Any]) -> list[Any]:
    """Each node event's ``args`` decoded: undecoded ones (``msgspec.Raw``) in one JSON array, which is
    a fraction of the time of one decode each; one that does not decode (a number beyond double range)
    reads as None."""
    raws = [a for a in args if type(a) is msgspec.Raw and a]
    if not raws:
        return args
    try:
        docs = orjson.loads(b"[" + b",".join(raws) + b"]")
    except orjson.JSONDecodeError:
        docs = [_one(a) for a in raws]
    if len(raws) == len(args):  # every node's args undecoded (the fast path's trace): in order
        return docs
    it = iter(docs)
    return [next(it) if type(a) is msgspec.Raw and a else (None if type(a) is msgspec.Raw else a)
            for a in args]


def _one(raw: msgspec.Raw) -> Any:
    try:
        return orjson.loads(memoryview(raw))
    except orjson.JSONDecodeError:
        return None


def backward_passes(nodes: list[tuple[float, float, Any, Any, str]], steps: list[tuple[float, float, int]]
                    ) -> dict[int, int]:
    """ProfilerStep number → backward passes that begin inside it, from the node events ``nodes``
    ((ts, end, thread, args)) and the sorted ``steps`` ((ts, end, number)); steps without any are left
    out, and so is every step where no node records its sequence number. Only the outermost node events
    of each thread count, and only the nodes of the forward thread most of them name."""
    last_end: dict[Any, float] = {}
    outer = []
    for node in sorted(nodes, key=lambda e: (e[0], -e[1])):
        thread = node[2]
        if node[0] < last_end.get(thread, -_INF):
            continue  # nested: a backward inside a node (reentrant checkpointing) is part of its pass
        last_end[thread] = node[1]
        outer.append(node)
    numbered = []  # (ts, sequence number, forward thread) of the outermost nodes that record a number
    for node, args in zip(outer, _decoded([n[3] for n in outer]), strict=True):
        if type(args) is dict and type(seq := args.get("Sequence number")) is int and seq >= 0:
            fwd = args.get("Fwd thread id")
            numbered.append((node[0], seq, fwd if type(fwd) in (int, str) else None))
    if not numbered:
        return {}
    main = Counter([f for *_, f in numbered]).most_common(1)[0][0]
    starts = [s[0] for s in steps]
    out: dict[int, int] = {}
    top = -1
    for ts, seq, fwd in numbered:
        if seq <= top or fwd != main:
            continue
        top = seq
        if (k := step_at(starts, steps, ts)) is not None:
            out[k] = out.get(k, 0) + 1
    return out


def optimizer_spans(optimizer: list[tuple[float, float]], nodes: list[tuple[float, float, Any, Any, str]]
                    ) -> list[tuple[float, float, int]]:
    """Steps for a trace that marks none (a profiler run without ``prof.step()``), from the optimizer's
    step annotations ``optimizer`` ((ts, end)) and the backward's node events ``nodes``: step k (1, 2, ...)
    runs from the end of the k-th optimizer step to the end of the next (the optimizer steps of one
    iteration, with no backward node between them, count as one: several optimizers, or one inside
    another). What comes before the first optimizer step's end (a profile may begin inside an iteration) and
    after the last one's is in no step; calls an iteration makes after its optimizer step (ZeRO's gathers of
    the updated parameters) fall in the next step. Empty where fewer than two optimizer steps end."""
    node_starts = sorted(n[0] for n in nodes)
    ends: list[float] = []
    for ts, end in sorted(optimizer):
        if ends and bisect.bisect_left(node_starts, ts) == bisect.bisect_left(node_starts, ends[-1]):
            ends[-1] = max(ends[-1], end)  # no backward since the one before: the same iteration's
        else:
            ends.append(end)
    return [(a, b, k) for k, (a, b) in enumerate(zip(ends, ends[1:], strict=False), start=1)]
