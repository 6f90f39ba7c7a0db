"""The node of the backward each all-gather of a Kineto trace ran in, and those of the recompute of
reentrant activation checkpointing.

The autograd engine runs each node of the backward inside an event of its own
(``autograd::engine::evaluate_function: <Node>``), and the hooks that gather a sharded scheme's parameters
for the backward run inside the node that calls them (DeepSpeed ZeRO-3's
``PreBackwardFunctionForModuleBackward``, FSDP's pre-backward hooks), on the thread that runs the backward.
An all-gather no node event encloses, in a trace that records them, ran outside the backward: in the forward
or after it. The innermost node event of a thread that holds a call is found in one sweep over the thread's
nodes and calls in order of their start.

``torch.utils.checkpoint.checkpoint(..., use_reentrant=True)`` runs its segment's forward under an
``autograd.Function``, ``CheckpointFunction``, whose backward runs that forward again and then a backward of
its own inside the node (``CheckpointFunctionBackward``); Megatron-LM's and DeepSpeed's activation
checkpointing are functions of that name too. A sharded scheme whose unit the segment holds gathers the unit
for the forward, again for the recompute, where its forward hooks run once more, and again for the unit's
backward where the recompute left it resharded: FSDP1 (``FULL_SHARD``; pytorch/pytorch#105635, "two
allgathers per layer" in the backward of a Llama under Hugging Face's gradient checkpointing; fairscale issue
777: ``checkpoint(FSDP(module))`` gathers for the forward, for the forward in the backward and for the
backward), and DeepSpeed ZeRO-3 where it does not keep the gathered parameters. FSDP2 prefetches the unit for
its backward before the recompute runs, and non-reentrant checkpointing recomputes inside the unit's own
backward: neither gathers a third time.

A call of the recompute runs inside the node event of that function's backward
(``autograd::engine::evaluate_function: CheckpointFunctionBackward``) and in no node nested in it: the
backward that follows the recompute runs its nodes inside it, each in an event of its own. Nor does it run
under an op that names a backward: FSDP1's ``_pre_backward_hook`` runs in that node too, where it
prefetches the next unit for its backward (that gather is the backward's own, and the recompute then finds
the unit whole).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from zerocalc.traces.kineto_events import _Selected
from zerocalc.traces.kineto_forward import EPS, _dict_fields, _struct_fields, call_names, enclosing

#: What names the node of a reentrant checkpoint's backward (``CheckpointFunctionBackward``).
CHECKPOINT = "Checkpoint"
#: The name a leaf's node (``AccumulateGrad``, kept apart by the reader without its name) is given.
LEAF = "AccumulateGrad"
#: The events of all-gather calls, by name.
_GATHERS = call_names(("all_gather",))


def backward_calls(events: Sequence[Any], sel: _Selected, decoded: bool = False
                   ) -> tuple[dict[int, str], dict[int, str]]:
    """The events of all-gathers run inside a node of the backward, by index, each with the name of the
    innermost such node (the engine's prefix left out; ``AccumulateGrad`` for a leaf's), and of those the
    ones run in a reentrant checkpoint's recompute, with that node's name: those whose innermost node is a
    checkpoint's (``CheckpointFunctionBackward``), and that no hook of the backward runs there
    (:func:`_in_backward_hook`); ``events`` as :func:`~zerocalc.traces.kineto_forward.forward_calls` takes
    them."""
    nodes: dict[object, list[tuple[float, float, str]]] = {}
    for ts, end, thread, _args, name, *_ in sel.backward:
        nodes.setdefault(thread, []).append((ts, end, name))
    for ts, end, thread in sel.leaves:
        nodes.setdefault(thread, []).append((ts, end, LEAF))
    fields: Callable[[Any], tuple] = _dict_fields if decoded else _struct_fields
    inside: dict[int, str] = {}
    again: dict[int, str] = {}
    for thread, calls in sel.comm.items():
        spans = nodes.get(thread)
        if not spans:
            continue
        gathers = [(ts, end, i) for ts, end, i, _ in calls if sel.recs[i][0] in _GATHERS]
        if not gathers:
            continue
        found = _innermost_nodes(sorted(spans, key=lambda s: (s[0], -s[1])), sorted(gathers))
        for i, (name, since, ts, end) in found.items():
            inside[i] = name.split(": ", 1)[-1]
            if CHECKPOINT in name and not _in_backward_hook(events, i, thread, (since, ts, end), fields):
                again[i] = inside[i]
    return inside, again


def _innermost_nodes(spans: list[tuple[float, float, str]], gathers: list[tuple[float, float, int]]
                     ) -> dict[int, tuple[str, float, float, float]]:
    """Of ``gathers`` ((ts, end, index), by start), those that a span of ``spans`` ((ts, end, name), by
    start, the longer first) encloses, with the innermost such span's name and start and the gather's start
    and end."""
    out: dict[int, tuple[str, float, float, float]] = {}
    stack: list[tuple[float, float, str]] = []
    j = 0
    for ts, end, i in gathers:
        while j < len(spans) and spans[j][0] <= ts + EPS:
            while stack and stack[-1][1] < spans[j][0] - EPS:
                stack.pop()  # ended before this node began: not its parent
            stack.append(spans[j])
            j += 1
        while stack and stack[-1][1] < end - EPS:
            stack.pop()  # ended before the call did: holds neither it nor any later call
        if stack:
            out[i] = (stack[-1][2], stack[-1][0], ts, end)
    return out


def _in_backward_hook(events: Sequence[Any], i: int, thread: tuple, at: tuple[float, float, float],
                      fields: Callable[[Any], tuple]) -> bool:
    """Whether an op that began inside the checkpoint's node and encloses event ``i`` (``at``: the node's
    start, the call's start and end) names a backward, among the
    :data:`~zerocalc.traces.kineto_forward.WINDOW` events before it: a hook of the backward that follows the
    recompute, run in the node itself (FSDP1's ``FullyShardedDataParallel._pre_backward_hook`` prefetching
    the next unit for its backward), where the recompute's forward hooks
    (``FullyShardedDataParallel._pre_forward``) name none."""
    since, ts, end = at
    for name, ets, _ in enclosing(events, i, thread, ts, end, fields):
        if ets < since - EPS:
            return False  # begun before the node: past every op inside it
        if "backward" in name.lower() and CHECKPOINT not in name:
            return True
    return False
