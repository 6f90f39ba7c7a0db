"""The canonical trace table and every source's key → column mapping, kept as data.

One row per collective call per rank. Each format module looks its raw
keys up in the tables below instead of branching on versions in code; a new
schema generation is a new table entry. Sources: the project files named at each table
(trace formats and their version histories).
"""

from __future__ import annotations

import re
from typing import Final

from zerocalc.dtypes import DTYPE_BYTES as _DTYPE_BYTES

#: Canonical columns and their pandas dtypes, in order. Missing facts are NA, never guessed. The
#: few-valued strings are ``category`` (one small code per call; categories sorted, so a sort or a
#: groupby orders them as strings; values read as ``str``): a table of millions of calls holds no
#: Python object per call.
CANONICAL_COLUMNS: Final[dict[str, str]] = {
    "file": "category",
    "rank": "Int64",
    "step": "Int64",
    "op": "category",
    "dtype": "category",
    "elem_bytes": "Int64",
    "in_nelems": "Int64",
    "out_nelems": "Int64",
    "group_size": "Int64",
    "group": "category",
    "start_s": "Float64",
    "duration_s": "Float64",
    "source_line": "Int64",
}

#: The closed set of values of the ``op`` column (the model's collective names, plus point-to-point).
OPS: Final[tuple[str, ...]] = (
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
    "all_to_all", "send", "recv", "barrier", "other",
)
#: The ops of :data:`OPS` that reduce (a gradient's, or an activation's).
REDUCTION_OPS: Final[tuple[str, ...]] = ("all_reduce", "reduce_scatter", "reduce")

#: Canonical dtype name → bytes per element (the one table, shared with the model).
DTYPE_BYTES = _DTYPE_BYTES

#: A collective whose full vector has at most this many elements is a scalar collective (a loss, a metric).
SCALAR_MAX_ELEMENTS: Final[int] = 8

# ---------------------------------------------------------------------------
# NCCL debug log (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL; NCCL src/enqueue.cc, src/nccl.h.in)
# ---------------------------------------------------------------------------

#: ``datatype <d>``: ncclDataType_t codes (nccl.h; bf16 since 2.10.3, fp8 since 2.24.3).
NCCL_DATATYPES: Final[dict[int, str]] = {
    0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64",
    6: "fp16", 7: "fp32", 8: "fp64", 9: "bf16", 10: "fp8e4m3", 11: "fp8e5m2",
}

#: ``op <r>``: ncclRedOp_t codes; ≥ 5 are PreMulSum ops created at run time.
NCCL_REDOPS: Final[dict[int, str]] = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}

#: NCCL op name → (canonical op, in_nelems factor, out_nelems factor), factors of ``count``
#: where "p" means × nranks. count is the total for AllReduce/Broadcast/Reduce, the
#: per-rank send count for AllGather, the per-rank receive count for ReduceScatter.
NCCL_COLL_OPS: Final[dict[str, tuple[str, str, str]]] = {
    "AllReduce": ("all_reduce", "1", "1"),
    "Broadcast": ("broadcast", "1", "1"),
    "Reduce": ("reduce", "1", "1"),
    "AllGather": ("all_gather", "1", "p"),
    "ReduceScatter": ("reduce_scatter", "p", "1"),
    "AllToAll": ("all_to_all", "p", "p"),  # RCCL: count per peer
    "Send": ("send", "1", "0"),
    "Recv": ("recv", "0", "1"),
    "Gather": ("other", "1", "p"),
    "Scatter": ("other", "p", "1"),
}

#: Regex group of a COLL line (the layout since NCCL 2.4) → the canonical/extra column it fills.
#: ``nccl_log`` builds its columns directly (column-wise, for speed); a test holds it to this table.
NCCL_COLL_FIELDS: Final[dict[str, str]] = {
    "host": "host", "pid": "pid", "tid": "tid", "dev": "device", "opcount": "opcount",
    "count": "count", "datatype": "dtype", "redop": "redop", "root": "root",
    "comm": "group", "nranks": "group_size", "globalrank": "rank",
}

# ---------------------------------------------------------------------------
# PyTorch profiler (Kineto) JSON (torch/csrc/distributed/c10d/ParamCommsUtils.cpp)
# ---------------------------------------------------------------------------

#: ``dtype`` arg of record_param_comms / kernels and ``Input type`` strings → canonical dtype.
TORCH_DTYPES: Final[dict[str, str]] = {
    "Float": "fp32", "float": "fp32", "Double": "fp64", "double": "fp64",
    "Half": "fp16", "c10::Half": "fp16", "BFloat16": "bf16", "c10::BFloat16": "bf16",
    "Long": "int64", "long int": "int64", "long": "int64", "Int": "int32", "int": "int32",
    "Short": "int16", "short int": "int16", "Char": "int8", "signed char": "int8",
    "Byte": "uint8", "unsigned char": "uint8", "Bool": "bool", "bool": "bool",
    "Float8_e4m3fn": "fp8e4m3", "c10::Float8_e4m3fn": "fp8e4m3",
    "Float8_e5m2": "fp8e5m2", "c10::Float8_e5m2": "fp8e5m2",
}

#: ``Collective name`` values → canonical op. ``wait`` (and friends) are dropped, not rows.
KINETO_COLLECTIVE_NAMES: Final[dict[str, str]] = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "all_reduce": "all_reduce",
    "allgather": "all_gather", "_allgather_base": "all_gather", "all_gather": "all_gather",
    "allgather_coalesced": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "broadcast": "broadcast", "reduce": "reduce",
    # an all-gather / reduce-scatter of unequal sizes: one out-of-place broadcast / reduction a rank
    # (ProcessGroupNCCL.cpp's RECORD_PARAM_COMMS_DATA colName "_broadcast_oop" / "_reduce_oop")
    "_broadcast_oop": "broadcast", "_reduce_oop": "reduce",
    "all_to_all": "all_to_all", "alltoall": "all_to_all", "alltoall_base": "all_to_all",
    "all_to_allv": "all_to_all",
    "send": "send", "recv": "recv", "recvAnySource": "recv", "barrier": "barrier",
    "gather": "other", "scatter": "other",
}
KINETO_IGNORED_COLLECTIVES: Final[frozenset[str]] = frozenset({"wait", "coalesced", "init", ""})

#: ``nccl:<op>`` / ``gloo:<op>`` annotation suffixes → canonical op, in Flight Recorder dumps too: the
#: profiling titles of ProcessGroupNCCL.cpp and ProcessGroupGloo.cpp. ``all_reduce_barrier``:
#: ProcessGroupNCCL's barrier, a one-element all-reduce, so named since PyTorch PR #140785 (2.6;
#: ``nccl:all_reduce`` before). ``_broadcast_oop`` / ``_reduce_oop``: the out-of-place broadcasts and
#: reductions, one a rank, that an all-gather / reduce-scatter of unequal sizes runs as (its slow path);
#: ``allreduce_coalesced``: NCCL's title of ``all_reduce_coalesced``.
KINETO_ANNOTATION_OPS: Final[dict[str, str]] = {
    "all_reduce_barrier": "barrier",
    "all_reduce": "all_reduce", "all_gather": "all_gather", "_all_gather_base": "all_gather",
    "all_gather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "broadcast": "broadcast", "_broadcast_oop": "broadcast", "reduce": "reduce", "_reduce_oop": "reduce",
    "all_to_all": "all_to_all",
    "send": "send", "recv": "recv", "barrier": "barrier", "gather": "other", "scatter": "other",
    "all_reduce_coalesced": "all_reduce", "allreduce_coalesced": "all_reduce",
    # the single-tensor and uneven ("_v") titles PyTorch's Flight Recorder analyzer lists beside them in
    # its later releases (tools/flight_recorder/components/types.py COLLECTIVES)
    "all_gather_single": "all_gather", "all_gather_v": "all_gather",
    "reduce_scatter_single": "reduce_scatter", "reduce_scatter_v": "reduce_scatter",
    "all_to_all_single": "all_to_all", "all_to_all_v_single": "all_to_all",
}
#: Entries of a Flight Recorder dump that are a communicator's bookkeeping, no call: a communicator split and
#: a memory window's creation (PyTorch's Flight Recorder analyzer lists ``split`` and ``new_window`` among
#: its entries in its later releases, tools/flight_recorder/components/types.py).
NOT_CALLS: Final[frozenset[str]] = frozenset({"split", "new_window"})
#: The annotation that closes a group of coalesced calls (``nccl:coalesced``: ProcessGroupNCCL's
#: ``endCoalescing``, with no tensors): its calls are entries of their own, so it is none.
ANNOTATION_GROUP_END: Final[str] = "coalesced"
_OPTYPE_GROUP_END = re.compile(r"[A-Z][A-Z0-9_]*_coalesced")


def closes_group(op: str) -> bool:
    """Whether ``op`` (a profiling title's op, or a ``Collective name``) closes a group of coalesced calls:
    ``coalesced``, or an ``OpType``'s name before ``_coalesced`` (``ALLGATHER_coalesced``,
    ``REDUCE_SCATTER_coalesced``: ``endCoalescing(OpType::ALLGATHER)`` after the ``_broadcast_oop`` calls
    of an all-gather of unequal sizes, as PyTorch's Flight Recorder analyzer lists them,
    ``tools/flight_recorder/components/types.py`` ``COLLECTIVES``); not ``allreduce_coalesced`` or
    ``all_gather_into_tensor_coalesced``, which are calls."""
    return op == ANNOTATION_GROUP_END or _OPTYPE_GROUP_END.fullmatch(op) is not None


#: Argument keys of record_param_comms / NCCL kernels, one table per schema generation
#: (PyTorch ``record_param_comms`` arguments). Checked newest first; a generation matches when its
#: marker key is present.
#: ``In msg size``/``Out msg size`` (Oct–Dec 2023) hold element counts: they were renamed to
#: ``... nelems`` without a change of meaning.
KINETO_ARG_GENERATIONS: Final[tuple[tuple[str, str, dict[str, str]], ...]] = (
    ("2024-pg-id", "Process Group ID", {
        "Collective name": "collective", "dtype": "dtype", "In msg nelems": "in_nelems",
        "Out msg nelems": "out_nelems", "Group size": "group_size", "Process Group ID": "group",
        "Rank": "rank", "Seq": "seq",
    }),
    ("2024-pg-name", "In msg nelems", {
        "Collective name": "collective", "dtype": "dtype", "In msg nelems": "in_nelems",
        "Out msg nelems": "out_nelems", "Group size": "group_size", "Process Group Name": "group",
        "Process Group Description": "group_desc", "Rank": "rank", "Seq": "seq",
    }),
    ("2023-msg-size", "In msg size", {
        "Collective name": "collective", "dtype": "dtype", "In msg size": "in_nelems",
        "Out msg size": "out_nelems", "Group size": "group_size",
    }),
)

#: c10d CPU ops (torch/csrc/distributed/c10d/Ops.cpp signatures) → (op, output arg index,
#: input arg index); -1 = no such buffer. In-place ops have the same index for both.
C10D_OPS: Final[dict[str, tuple[str, int, int]]] = {
    "c10d::allreduce_": ("all_reduce", 0, 0),
    "c10d::allreduce_coalesced_": ("all_reduce", 0, 0),
    "c10d::broadcast_": ("broadcast", 0, 0),
    "c10d::reduce_": ("reduce", 0, 0),
    "c10d::_allgather_base_": ("all_gather", 0, 1),
    "c10d::allgather_": ("all_gather", 0, 1),
    "c10d::allgather_into_tensor_coalesced_": ("all_gather", 0, 1),
    "c10d::allgather_coalesced_": ("all_gather", 0, 1),
    "c10d::_reduce_scatter_base_": ("reduce_scatter", 0, 1),
    "c10d::reduce_scatter_": ("reduce_scatter", 0, 1),
    "c10d::reduce_scatter_tensor_coalesced_": ("reduce_scatter", 0, 1),
    "c10d::alltoall_base_": ("all_to_all", 0, 1),
    "c10d::alltoall_": ("all_to_all", 0, 1),
    "c10d::send": ("send", -1, 0),
    "c10d::recv_": ("recv", 0, -1),
    "c10d::recv_any_source_": ("recv", 0, -1),
    "c10d::barrier": ("barrier", -1, -1),
    "c10d::monitored_barrier_": ("barrier", -1, -1),
    "c10d::gather_": ("other", 0, 1),
    "c10d::scatter_": ("other", 0, 1),
}

#: gloo transports a reduce-scatter as an all-reduce of the full input (ProcessGroupGloo).
GLOO_TRANSPORT_OPS: Final[dict[str, frozenset[str]]] = {
    "reduce_scatter": frozenset({"reduce_scatter", "all_reduce"}),
}

# ---------------------------------------------------------------------------
# nccl-tests *_perf output (nccl-tests src/util.cu, src/common.cu)
# ---------------------------------------------------------------------------

#: Column layouts of a result row, one per generation. ``oop``/``ip`` = out-of-place / in-place.
NCCL_TESTS_LAYOUTS: Final[dict[str, tuple[str, ...]]] = {
    # since Aug 2022: size count type redop root | time algbw busbw #wrong | same in-place
    "2022": ("size_bytes", "count", "type", "redop", "root",
             "oop_time_us", "oop_algbw", "oop_busbw", "oop_wrong",
             "ip_time_us", "ip_algbw", "ip_busbw", "ip_wrong"),
    # before: size count type redop | time algbw busbw error (reduction tests)
    "pre2022-redop": ("size_bytes", "count", "type", "redop",
                      "oop_time_us", "oop_algbw", "oop_busbw", "oop_wrong",
                      "ip_time_us", "ip_algbw", "ip_busbw", "ip_wrong"),
    # before: size count type | time algbw busbw error (all_gather, alltoall, ...)
    "pre2022": ("size_bytes", "count", "type",
                "oop_time_us", "oop_algbw", "oop_busbw", "oop_wrong",
                "ip_time_us", "ip_algbw", "ip_busbw", "ip_wrong"),
}

#: ``-J`` JSON result keys (nccl-tests util.cu, JSON_FILE_VERSION 2) → layout names above.
NCCL_TESTS_JSON_KEYS: Final[dict[str, str]] = {
    "size": "size_bytes", "count": "count", "type": "type", "redop": "redop", "root": "root",
}
NCCL_TESTS_JSON_BODY: Final[dict[str, str]] = {
    "time": "time_us", "cpu_time": "time_us", "alg_bw": "algbw", "bus_bw": "busbw", "nwrong": "wrong",
}

#: nccl-tests binary → (op, in factor, out factor, busbw factor name). ``count`` printed is the
#: NCCL count argument (nccl-tests ``src/common.cu``: ``size`` = max(send, receive) bytes, ``count`` =
#: the ``paramcount`` of the test's ``GetCollByteCount``); for all_gather ``size`` = count × elem ×
#: nranks (src/all_gather.cu). The point-to-point tests (each ``src/<test>.cu``, ``GetCollByteCount`` and
#: ``GetBw``): alltoall ``count`` per peer, size = count × elem × nranks, busbw = algbw × (n-1)/n;
#: sendrecv ``count`` sent to rank+1 and received from rank-1, size = count × elem, busbw = algbw;
#: gather / scatter ``count`` per rank (sent to / received from the root), size = count × elem × nranks
#: (the root's buffer), busbw = algbw × (n-1)/n; hypercube ``count`` per rank, gathered over log2(n)
#: exchanges, size = count × elem × nranks, algbw = count × elem × (n-1) / time and busbw = algbw;
#: alltoallv (added Mar 2026) sends an uneven count to each peer ("?": not told by ``count``).
#: Gather, scatter, hypercube and alltoallv have no canonical op (``other``; NCCL logs ``Gather`` and
#: ``Scatter`` calls as ``other`` too); their rows keep the test in ``nccl_test``.
NCCL_TESTS_OPS: Final[dict[str, tuple[str, str, str, str]]] = {
    "all_reduce": ("all_reduce", "1", "1", "2(p-1)/p"),
    "all_gather": ("all_gather", "1", "p", "(p-1)/p"),
    "reduce_scatter": ("reduce_scatter", "p", "1", "(p-1)/p"),
    "broadcast": ("broadcast", "1", "1", "1"),
    "reduce": ("reduce", "1", "1", "1"),
    "alltoall": ("all_to_all", "p", "p", "(p-1)/p"),
    "alltoallv": ("other", "?", "?", "(p-1)/p"),
    "sendrecv": ("send", "1", "1", "1"),
    "gather": ("other", "1", "p", "(p-1)/p"),
    "scatter": ("other", "p", "1", "(p-1)/p"),
    "hypercube": ("other", "1", "p", "1"),
}

#: nccl-tests ``type`` column → canonical dtype. rccl-tests names its fp8 types ``fp8_e4m3`` and ``fp8_e5m2``
#: (ROCm/rccl-tests ``src/common.cu`` ``test_typenames``, from commit 21e59fb "Enable fp8 support (#63)",
#: Mar 2024), where nccl-tests prints ``f8e4m3`` and ``f8e5m2``.
NCCL_TESTS_DTYPES: Final[dict[str, str]] = {
    "int8": "int8", "char": "int8", "uint8": "uint8", "int32": "int32", "int": "int32",
    "uint32": "uint32", "int64": "int64", "uint64": "uint64", "half": "fp16", "float16": "fp16",
    "float": "fp32", "float32": "fp32", "double": "fp64", "float64": "fp64",
    "bfloat16": "bf16", "f8e4m3": "fp8e4m3", "f8e5m2": "fp8e5m2",
    "fp8_e4m3": "fp8e4m3", "fp8_e5m2": "fp8e5m2",
}

# ---------------------------------------------------------------------------
# DeepSpeed comms logger (deepspeed/utils/comms_logging.py)
# ---------------------------------------------------------------------------

#: DeepSpeed record names → canonical op.
DEEPSPEED_OPS: Final[dict[str, str]] = {
    "all_reduce": "all_reduce", "inference_all_reduce": "all_reduce", "all_reduce_coalesced": "all_reduce",
    "all_gather": "all_gather", "all_gather_into_tensor": "all_gather", "all_gather_base": "all_gather",
    "allgather_fn": "all_gather", "all_gather_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_base": "reduce_scatter", "reduce_scatter_fn": "reduce_scatter",
    "broadcast": "broadcast", "reduce": "reduce",
    "all_to_all_single": "all_to_all", "all_to_all": "all_to_all",
    "send": "send", "isend": "send", "recv": "recv", "irecv": "recv",
    "barrier": "barrier", "log_summary_barrier": "barrier", "monitored_barrier": "barrier",
    "gather": "other", "scatter": "other",
}

#: Unit suffix of DeepSpeed's ``convert_size`` (1024-based) → bytes per unit.
DEEPSPEED_SIZE_UNITS: Final[dict[str, int]] = {
    "B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4, "PB": 1024**5,
}

#: Summary table columns after the size column, in order.
DEEPSPEED_SUMMARY_COLUMNS: Final[tuple[str, ...]] = (
    "calls", "total_latency_ms", "avg_latency_ms", "tput_avg_Gbps", "busbw_avg_Gbps",
)

# ---------------------------------------------------------------------------
# PyTorch Flight Recorder, JSON dump (torch/csrc/distributed/c10d/FlightRecorder.hpp, dump version "2.x")
# ---------------------------------------------------------------------------

#: Canonical (or extra) column → the entry key it is read from (traces/flight_recorder.py says how).
FLIGHT_RECORDER_KEYS: Final[dict[str, str]] = {
    "op_name": "profiling_name", "group": "process_group", "in_nelems": "input_sizes",
    "out_nelems": "output_sizes", "dtype": "input_dtypes", "out_dtype": "output_dtypes",
    "start_s": "time_created_ns",
    "duration_s": "duration_ms", "seq": "collective_seq_id", "record": "record_id", "state": "state",
}
#: The dump's own keys: its groups (name → name, desc, ranks) and the NCCL release.
FLIGHT_RECORDER_DUMP_KEYS: Final[dict[str, str]] = {
    "entries": "entries", "groups": "pg_config", "nccl_version": "comm_lib_version", "version": "version",
}
