"""The events of a Kineto trace that the table uses: decoded field by field with msgspec (``args``
left undecoded until needed), each complete event classified by name and category (a collective's
CPU events, a GPU kernel, a runtime launch, a profiler step, a gloo work annotation) and kept in
compact form (:class:`_Selected`), and the readers of their fields (numbers, element counts).
"""

from __future__ import annotations

import bisect
import codecs
import math
import re
from collections.abc import Iterable
from itertools import compress
from operator import attrgetter
from typing import Any, NamedTuple, Union

import msgspec
import orjson

from zerocalc.traces.records import ParseResult, bad
from zerocalc.traces.schema import TORCH_DTYPES

#: NCCL's GPU kernels: its collectives' (``ncclKernel`` to 2.18, ``ncclDevKernel`` from 2.19) and, on
#: buffers registered as a symmetric window, its symmetric kernels' (``ncclSymDevKernel`` in 2.27,
#: ``ncclSymkDevKernel`` from 2.28: :data:`zerocalc.nccl.symmetric.SYMBOL_PREFIXES`).
_KERNEL_PREFIXES = ("ncclKernel", "ncclDevKernel", "ncclSymDevKernel", "ncclSymkDevKernel")
#: Name prefixes of the events that may matter (with ``record_param_comms`` and runtime launches).
#: The name prefix of the autograd engine's node events (:mod:`~zerocalc.traces.kineto_backward`).
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
#: The node event that records no sequence number (a leaf's gradient accumulated; a sixth of the nodes of a
#: ResNet-50's backward): no pass is counted by it, but the hooks run inside it (DDP's all-reduces, FSDP1's
#: reduce-scatters), so its span is kept (:attr:`_Selected.leaves`).
UNNUMBERED = BACKWARD_PREFIX + "torch::autograd::AccumulateGrad"
#: The profiler's annotation of a ``torch.optim.Optimizer``'s step (``Optimizer.step#Adam.step``).
OPTIMIZER_PREFIX = "Optimizer.step#"
#: The op FSDP2 copies a unit's gradients into its reduce-scatter input with
#: (``foreach_reduce_scatter_copy_in``: ``torch._chunk_cat(unsharded_grads, dim=0, num_chunks=world_size,
#: out=reduce_scatter_input.view(world_size, -1))``, under ``fsdp::chunk_cat`` in later releases): its
#: ``Input Dims`` hold the gradients' own shapes and the padded input's (:func:`chunk_cat_sizes`).
CHUNK_CAT = "aten::_chunk_cat"
#: The op FSDP1 pads a flat gradient with to a multiple of the ranks before its reduce-scatter
#: (``_get_reduce_scatter_tensors`` in ``torch/distributed/fsdp/_runtime_utils.py``: ``F.pad(unsharded_grad,
#: [0, numel_to_pad])``): its ``Input Dims`` hold the flat gradient's own elements and its ``Concrete
#: Inputs`` the padding (:func:`pad_sizes`).
FSDP1_PAD = "aten::pad"
#: The ops DDP's reducer copies each gradient into its bucket with (``copy_grad_to_bucket`` in
#: ``torch/csrc/distributed/c10d/reducer.cpp``: ``mul_out`` dividing by the ranks as it copies; ``copy_``
#: where a comm hook is registered, which divides or not as it likes): their first ``Input Dims`` are the
#: gradient's shape (:func:`bucket_copy_elements`).
DDP_BUCKET_COPIES = ("torch::distributed::reducer::mul_out", "torch::distributed::reducer::copy_")
_NAME_PREFIXES = ("c10d::", "nccl:", "gloo:", "ProfilerStep#", *_KERNEL_PREFIXES, BACKWARD_PREFIX,
                  OPTIMIZER_PREFIX, CHUNK_CAT, FSDP1_PAD, *DDP_BUCKET_COPIES)
_US = 1e-6
_INF = math.inf
_NO_ARGS = msgspec.Raw()


class _Event(msgspec.Struct, tag="X", tag_field="ph", gc=False):
    """The fields of one complete event (``"ph": "X"``) that the parser reads; others are skipped.

    ``args`` stays an undecoded slice of the input (``msgspec.Raw``) until the parser
    needs it, which is for a few hundred of the tens of thousands of events. The fields are in
    the order Kineto writes them (msgspec looks a key up from the field after the last one found).
    """

    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: msgspec.Raw = _NO_ARGS


# Every other event phase of the Chrome trace event format: decoded as an empty object, whose
# ``name`` (a class attribute, not a field: nothing is decoded) is None, as no complete event's is.
_OTHER_PHASES = tuple(msgspec.defstruct(f"_Phase{i}", [], tag=ph, tag_field="ph", gc=False,
                                        namespace={"name": None})
                      for i, ph in enumerate("B E i I C b n e S T p F s t f P N O D M V v R c ( )".split()))

_ANY_EVENT = Union[(_Event, *_OTHER_PHASES)]  # noqa: UP007 (built from a tuple)


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[_ANY_EVENT]  # noqa: N815 (the JSON key)
    distributedInfo: msgspec.Raw = _NO_ARGS  # noqa: N815
    deviceProperties: msgspec.Raw = _NO_ARGS  # noqa: N815 (Kineto's CUDA device list: each GPU's name)


_DECODER = msgspec.json.Decoder(_Trace)


class _Invalid(Exception):
    """The fast path met input it does not vouch for: decode the whole document instead."""



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



def step_at(starts: list[float], steps: list[tuple[float, float, int]], ts: float) -> int | None:
    """The number of the step of the sorted ``steps`` ((ts, end, number); ``starts`` their ts) within which
    ``ts`` falls, None where none holds it."""
    j = bisect.bisect_right(starts, ts) - 1
    return steps[j][2] if j >= 0 and ts <= steps[j][1] else None


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



def chunk_cat_sizes(raw: Any) -> tuple[int, int] | None:
    """(padded, own) elements of one ``aten::_chunk_cat`` of FSDP2's (:data:`CHUNK_CAT`): its ``out``, the
    unit's reduce-scatter input of (shard ranks, padded shard) elements, and the gradients it copies in, their
    first dimensions unpadded; None where its ``Input Dims`` do not read so (shapes not recorded, another
    signature, more elements in than out)."""
    args = _args(raw)
    dims = args.get("Input Dims") if isinstance(args, dict) else None
    if not isinstance(dims, list) or len(dims) != 4 or not isinstance(dims[0], list) or not dims[0]:
        return None
    shapes = [_prod(d) for d in dims[0]]
    padded = _prod(dims[3])
    if padded is None or None in shapes or not 0 < sum(shapes) <= padded:
        return None
    return padded, sum(shapes)


def pad_sizes(raw: Any) -> tuple[int, int] | None:
    """(padded, own) elements of one ``aten::pad`` of a flat vector at its end (:data:`FSDP1_PAD`): its one
    1-D input and its ``[0, p]`` padding, p > 0; None where its arguments do not read so (shapes not recorded,
    another tensor or padding)."""
    args = _args(raw)
    if not isinstance(args, dict):
        return None
    dims, given = args.get("Input Dims"), args.get("Concrete Inputs")
    if not (isinstance(dims, list) and dims and isinstance(dims[0], list) and len(dims[0]) == 1
            and isinstance(given, list) and len(given) > 1 and isinstance(given[1], str)):
        return None
    own = _prod(dims[0])
    m = re.fullmatch(r"\[0, ([0-9]+)\]", given[1])
    if own is None or own <= 0 or m is None or int(m[1]) <= 0:
        return None
    return own + int(m[1]), own


def bucket_copy_elements(raw: Any) -> int | None:
    """The elements of the gradient one of DDP's bucket copies (:data:`DDP_BUCKET_COPIES`) copies: its first
    ``Input Dims``; None where the shapes were not recorded or do not read as one."""
    args = _args(raw)
    dims = args.get("Input Dims") if isinstance(args, dict) else None
    if not isinstance(dims, list) or not dims or not isinstance(dims[0], list) or not dims[0]:
        return None
    return _prod(dims[0])


#: Types a pid or tid may have: what identifies a thread must be hashable and comparable.
_SCALARS = (int, str, float)
_NUMBERS = (int, float)


class _Selected(NamedTuple):
    """What the table needs of a trace, in compact form; the events themselves are not kept."""

    n_events: int
    recs: dict[int, tuple[str, Any, Any, Any]]  # event index -> (name, ts, dur, args) of used events
    comm: dict[Any, list[tuple[float, float, int, str]]]  # thread -> (ts, end, index, kind)
    steps: list[tuple[float, float, int]]
    gloo: list[tuple[float, float, int, Any]]  # (ts, end, index, worker thread)
    kernels: list[int]
    launches: list[tuple[Any, Any, float]]  # (args, thread, ts) of cudaLaunch* calls, in order
    backward: list[tuple[float, float, Any, Any, str]]  # (ts, end, thread, args, name) of the engine's nodes
    leaves: list[tuple[float, float, Any]]  # (ts, end, thread) of its AccumulateGrad nodes (UNNUMBERED)
    optimizer: list[tuple[float, float]]  # (ts, end) of each optimizer step annotation
    chunk_cats: list[Any]  # the undecoded args of each aten::_chunk_cat (FSDP2's reduce-scatter copy-in)
    pads: list[Any]  # the undecoded args of each aten::pad (FSDP1's flat gradient padded to the ranks)
    bucket_copies: list[Any]  # the undecoded args of each of DDP's gradient copies into its buckets


# What one (name, cat) pair of a complete ("X") event is to the parser.
(_SKIP, _KERNEL, _LAUNCH, _STEP, _GLOO, _C10D, _RPC, _ANNOT, _CHECKED, _NODE, _OPTIMIZER, _CHUNK,
 _LEAF, _BUCKET, _PAD) = range(15)


def _classify(name: str, cat: Any) -> int:
    """The role of an event by name and category; ``_CHECKED`` = relevant, then dropped."""
    if not (name.startswith(_NAME_PREFIXES) or name == "record_param_comms"
            or (cat == "cuda_runtime" and "Launch" in name)):
        return _SKIP
    if name == UNNUMBERED:
        return _LEAF if cat == "cpu_op" else _CHECKED
    if cat == "kernel":
        return _KERNEL if name.startswith(_KERNEL_PREFIXES) else _CHECKED
    if cat == "cuda_runtime":
        return _LAUNCH
    if name.startswith("ProfilerStep#"):
        return _STEP
    if name.startswith(BACKWARD_PREFIX):
        return _NODE if cat == "cpu_op" else _CHECKED
    if name == CHUNK_CAT:
        return _CHUNK if cat == "cpu_op" else _CHECKED
    if name.startswith(FSDP1_PAD):  # aten::pad_sequence and the like pass the name filter, and are nothing
        return _PAD if name == FSDP1_PAD and cat == "cpu_op" else _SKIP
    if name in DDP_BUCKET_COPIES:
        return _BUCKET if cat == "cpu_op" else _CHECKED
    if name.startswith(OPTIMIZER_PREFIX):
        return _OPTIMIZER if cat == "user_annotation" else _CHECKED  # gpu_user_annotation: its GPU span
    if name.startswith("gloo:"):
        return _GLOO if cat == "user_annotation" else _CHECKED
    if name.startswith("nccl:") and cat != "user_annotation":
        return _CHECKED  # gpu_user_annotation duplicates
    return _C10D if name.startswith("c10d::") else _RPC if name == "record_param_comms" else _ANNOT


class _NameFilter(dict):
    """name -> whether an event of that name may matter, whatever its category (cached); a name
    that is not a string (None for an event that is not a complete one) never does."""

    def __missing__(self, name: Any) -> bool:
        v = self[name] = type(name) is str and (
            name.startswith(_NAME_PREFIXES) or name == "record_param_comms" or "Launch" in name
        )
        return v


_NAME = attrgetter("name")


def _maybe_used(events: list) -> list[tuple[int, _Event]]:
    """(index, event) of the complete events (:class:`_Event`) of a decoded ``traceEvents`` whose
    name may matter (:class:`_NameFilter`), in order.

    The names are taken and looked up by maps, not by a loop of Python code over the tens of
    thousands of events a trace holds (most of them CPU ops): a sixth of the time of a parse
    (benchmarks/bench_kineto.py --ranks)."""
    maybe = _NameFilter()
    try:
        keep = list(map(maybe.__getitem__, map(_NAME, events)))
    except TypeError:  # a name that cannot be a key (a list, an object) is no string: it never matters
        keep = [type(n := e.name) is str and maybe[n] for e in events]
    return [(i, events[i]) for i in compress(range(len(events)), keep)]


_COMM_KIND = {_C10D: "c10d", _RPC: "rpc", _ANNOT: "annot"}


def _select(events: Iterable[tuple[int, _Event | None]], n_events: int, file: str, strict: bool,
            res: ParseResult) -> _Selected:
    """Keep what the table needs of (index, complete event) pairs that passed :class:`_NameFilter`.

    ``None`` stands for an event that is not an object.
    """
    sel = _Selected(n_events, {}, {}, [], [], [], [], [], [], [], [], [], [])
    recs, comm, launches = sel.recs, sel.comm, sel.launches
    roles: dict[tuple[str, Any], int] = {}
    for i, e in events:
        if e is None:
            bad(file, None, f"event {i} is not an object", strict, res.skipped)
            continue
        name, cat = e.name, e.cat
        key = (name, cat if type(cat) is str else None)  # any other category plays no part
        role = roles.get(key)
        if role is None:
            role = roles[key] = _classify(*key)
        if role == _SKIP:
            continue
        if role == _CHUNK:
            sel.chunk_cats.append(e.args)
            continue
        if role == _PAD:
            sel.pads.append(e.args)
            continue
        if role == _BUCKET:
            sel.bucket_copies.append(e.args)
            continue
        ts, dur = e.ts, e.dur
        if role == _NODE or role == _OPTIMIZER or role == _LEAF:
            # a node of the backward, an optimizer step (kineto_backward): one that is malformed is left out
            pid, tid = e.pid, e.tid
            if type(ts) in _NUMBERS and type(dur) in _NUMBERS and -_INF < ts < _INF and 0 <= dur < _INF and (
                    pid is None or type(pid) in _SCALARS) and (tid is None or type(tid) in _SCALARS):
                if role == _NODE:
                    sel.backward.append((ts, ts + dur, (pid, tid), e.args, name))
                elif role == _LEAF:
                    sel.leaves.append((ts, ts + dur, (pid, tid)))
                else:
                    sel.optimizer.append((ts, ts + dur))
            continue
        if not (type(ts) is float and type(dur) is float and -_INF < ts < _INF and 0.0 <= dur < _INF):
            ts, dur = _num(ts), _num(dur)  # what is not a finite float, the rare case: as _num reads it
            if ts is None or dur is None or dur < 0:
                bad(file, None, f"event {i} ({name[:40]!r}) without a valid ts/dur", strict, res.skipped)
                continue
        pid, tid = e.pid, e.tid
        if not ((pid is None or type(pid) in _SCALARS) and (tid is None or type(tid) in _SCALARS)):
            bad(file, None, f"event {i} ({name[:40]!r}) with a pid/tid that is not a number or a string",
                strict, res.skipped)
            continue
        thread = (pid, tid)
        if role == _LAUNCH:  # arguments decoded only if a kernel has to be linked by correlation
            launches.append((e.args, thread, ts))
            continue
        if role == _STEP:
            k = _int(name[len("ProfilerStep#"):])
            if k is not None:
                sel.steps.append((ts, ts + dur, k))
            continue
        if role == _CHECKED:
            continue
        args = _args(e.args)
        if args is not None and type(args) is not dict:
            bad(file, None, f"event {i} ({name[:40]!r}) whose args are not an object", strict, res.skipped)
            continue
        recs[i] = (name, e.ts, e.dur, args)
        if role == _KERNEL:
            sel.kernels.append(i)
        elif role == _GLOO:
            sel.gloo.append((ts, ts + dur, i, thread))
        else:
            comm.setdefault(thread, []).append((ts, ts + dur, i, _COMM_KIND[role]))
    return sel
