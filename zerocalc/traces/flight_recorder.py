"""PyTorch's Flight Recorder dumps (``torch/csrc/distributed/c10d/FlightRecorder*``): the
``TORCH_FR_BUFFER_SIZE`` ring buffer as ``torch._C._distributed_c10d._dump_fr_trace_json()`` returns it
(or, in builds with NCCL, ``_dump_nccl_trace_json()``), and the pickle of the same dump, what a watchdog
timeout writes to ``TORCH_FR_DUMP_TEMP_FILE`` + rank and ``_dump_fr_trace()`` returns, loaded as data
without running code (:mod:`zerocalc.traces.pickled`; its tuples read as the JSON's lists, and its
``None`` where the JSON has 0 for a time not taken, read alike).

One dump is one rank's: ``{"version": "2.10", "comm_lib_version": "2.21.5", "pg_config": {name: {"name",
"desc", "ranks": "[0, 2]"}}, "pg_status": {...}, "entries": [...]}``, each entry one collective the rank
enqueued, oldest first (the last ``TORCH_FR_BUFFER_SIZE`` of them)::

    {"record_id": 3, "pg_id": 1, "process_group": ["1", "undefined"], "collective_seq_id": 2,
     "p2p_seq_id": 0, "op_id": 2, "profiling_name": "nccl:all_reduce", "time_created_ns": ...,
     "input_sizes": [[43296]], "input_dtypes": ["Float"], "output_sizes": [[43296]],
     "output_dtypes": ["Float"], "state": "completed", "duration_ms": 0.41, "is_p2p": false, ...}

What the fields give (PyTorch ``FlightRecorder.hpp`` / ``FlightRecorderDetail.hpp``, and its
``tools/flight_recorder`` reader):

* the op from ``profiling_name`` (``nccl:``/``gloo:`` and the c10d op, as a Kineto ``record_function``
  annotation names it; ``nccl:send 0->1`` / ``nccl:recv 1<-0`` for point-to-point), the backend from its
  prefix; ``nccl:coalesced``, the entry that closes a group of coalesced calls (after the group's own
  entries, all with its ``collective_seq_id``; ``tools/flight_recorder``'s ``find_coalesced_group``), is
  not a call;
* the element counts as the sums of the ``input_sizes`` / ``output_sizes`` shapes, the type from
  ``input_dtypes``;
* the group from ``process_group`` ``[name, description]``; its members from ``pg_config[name]["ranks"]``
  (a list written as text), else, for a group whose dump lists none (gloo's dumps list an empty one), its
  size from an all-gather or reduce-scatter of that group (output over input elements), else its members
  from the dumps read together (:func:`members_across_dumps`);
* ``duration_ms`` only where the process group timed its work (``TORCH_NCCL_ENABLE_TIMING=1``, NCCL), from
  the work's start event to its end event on the stream; ``time_created_ns`` when it was enqueued;
* ``comm_lib_version`` the NCCL version (empty for gloo);
* the dump states no rank and no world size: the rank is read from the file's name (its last number:
  ``rank3.json``, ``nccl_trace_rank_3``, as ``tools/flight_recorder`` reads it); no training step is marked.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

from zerocalc.errors import TraceFormatError
from zerocalc.traces.pickled import is_pickle, load_data
from zerocalc.traces.records import ParseResult, bad, json_document
from zerocalc.traces.schema import DTYPE_BYTES, KINETO_ANNOTATION_OPS, NOT_CALLS, TORCH_DTYPES, closes_group
from zerocalc.traces.schema import FLIGHT_RECORDER_DUMP_KEYS as DUMP
from zerocalc.traces.schema import FLIGHT_RECORDER_KEYS as KEY

FORMAT = "flight_recorder"

_NAME = re.compile(r"^(?P<backend>[A-Za-z0-9_]+):(?P<op>[A-Za-z_]+)(?P<rest>.*)$")
_LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")
_RANKS = re.compile(r"-?\d+")


def rank_from_name(file: str) -> int | None:
    """The rank a dump's file name gives: its last number (``rank3.json``, ``nccl_trace_rank_3``)."""
    m = _LAST_NUMBER.search(os.path.basename(file))
    return int(m.group(1)) if m else None


def _ranks(text: Any) -> tuple[int, ...]:
    """The ranks a ``pg_config`` entry lists (``"[0, 2]"``, or a list)."""
    if isinstance(text, list):
        return tuple(int(r) for r in text if isinstance(r, int) and not isinstance(r, bool))
    return tuple(int(r) for r in _RANKS.findall(str(text or "")))


def _nelems(shapes: Any) -> int | None:
    """The elements of a list of tensor shapes (``[[2, 3], [4]]`` → 10); ``None`` if it is not one."""
    if not isinstance(shapes, list):
        return None
    total = 0
    for shape in shapes:
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in shape):
            return None
        total += math.prod(shape)
    return total


def _groups(pg_config: Any) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each process group the dump lists: name → (description, its ranks)."""
    out = {}
    if isinstance(pg_config, dict):
        for key, pg in pg_config.items():
            if isinstance(pg, dict):
                out[str(pg.get("name", key))] = (str(pg.get("desc") or ""), _ranks(pg.get("ranks")))
    return out


def parse_document(doc: Any, file: str, *, strict: bool = False) -> ParseResult:
    """One rank's dump (decoded JSON) → canonical rows (module docstring)."""
    if not isinstance(doc, dict) or not isinstance(doc.get(DUMP["entries"]), list):
        raise TraceFormatError(file, None, f"not a Flight Recorder dump: no {DUMP['entries']!r} list")
    rank = rank_from_name(file)
    groups = _groups(doc.get(DUMP["groups"]))
    version = str(doc.get(DUMP["nccl_version"]) or "") or None
    res = ParseResult(meta={"format": FORMAT, "rank": rank, "world_size": None, "nccl_version": None,
                            "fr_version": doc.get(DUMP["version"])})
    backends: set[str] = set()
    rows = res.rows
    for i, e in enumerate(doc[DUMP["entries"]]):
        if _no_call(e):
            continue
        try:
            row = _row(e, file, i, rank, groups)
        except ValueError as exc:
            bad(file, None, f"entry {i}: {exc}", strict, res.skipped)
            continue
        backends.add(row.pop("backend"))
        rows.append(row)
    _sizes_from_gathers(rows)
    backend = next(iter(backends)) if len(backends) == 1 else None
    res.meta.update(backend=backend, nccl_version=version if backend == "nccl" else None)
    worlds = {len(r) for d, r in groups.values() if d == "default_pg" and r}
    if len(worlds) == 1:
        res.meta["world_size"] = next(iter(worlds))
    return res


def _no_call(e: Any) -> bool:
    """Whether an entry is no call: the one that closes a group of coalesced calls (``nccl:coalesced``,
    recorded after the group's calls, each an entry of its own with the group's ``collective_seq_id``;
    :func:`zerocalc.traces.schema.closes_group`), or a communicator's bookkeeping
    (:data:`zerocalc.traces.schema.NOT_CALLS`)."""
    name = e.get(KEY["op_name"]) if isinstance(e, dict) else None
    m = _NAME.match(name) if isinstance(name, str) else None
    return m is not None and (closes_group(m["op"]) or m["op"] in NOT_CALLS) and not m["rest"]


def _row(e: Any, file: str, i: int, rank: int | None, groups: dict) -> dict[str, Any]:
    if not isinstance(e, dict):
        raise ValueError("not an object")
    name = e.get(KEY["op_name"])
    m = _NAME.match(name) if isinstance(name, str) else None
    if m is None:
        raise ValueError(f"{KEY['op_name']} {name!r} is not '<backend>:<op>'")
    op = KINETO_ANNOTATION_OPS.get(m["op"], "other")
    pg = e.get(KEY["group"])
    pg_name, desc = (str(pg[0]), str(pg[1])) if isinstance(pg, list) and len(pg) == 2 else (None, "")
    listed = groups.get(pg_name) if pg_name is not None else None
    members = listed[1] if listed else ()
    i_n, o_n = _nelems(e.get(KEY["in_nelems"])), _nelems(e.get(KEY["out_nelems"]))
    dtypes = e.get(KEY["dtype"]) or e.get(KEY["out_dtype"]) or []  # a receive has outputs alone
    dt = dtypes[0] if isinstance(dtypes, list) and dtypes and isinstance(dtypes[0], str) else None
    dtype = TORCH_DTYPES.get(dt, dt) if dt else None
    duration = e.get(KEY["duration_s"])
    created = e.get(KEY["start_s"])
    seq, record = e.get(KEY["seq"]), e.get(KEY["record"], i)
    for key, v in (("seq", seq), ("record", record)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise ValueError(f"{KEY[key]} {v!r} is not an integer")
    return {"file": file, "rank": rank, "step": None, "op": op, "dtype": dtype,
            "elem_bytes": DTYPE_BYTES.get(dtype) if dtype else None, "in_nelems": i_n, "out_nelems": o_n,
            "group_size": len(members) or None, "group": pg_name,
            "start_s": created * 1e-9 if isinstance(created, int) and created > 0 else None,
            "duration_s": float(duration) * 1e-3 if isinstance(duration, int | float)
            and not isinstance(duration, bool) and duration >= 0 else None,
            "source_line": None, "op_name": name, "group_desc": desc or (listed[0] if listed else None),
            "group_ranks": ",".join(map(str, members)) if members else None, "state": e.get(KEY["state"]),
            "seq": seq, "record": record, "backend": m["backend"],
            "peer": _peer(m["op"], m["rest"])}


def _peer(op: str, rest: str) -> int | None:
    """The peer of a point-to-point entry (``send 0->1``: 1; ``recv 1<-0``: 0)."""
    if op not in ("send", "recv"):
        return None
    m = re.search(r"(?:->|<-)\s*(\d+)", rest)
    return int(m.group(1)) if m else None


def _sizes_from_gathers(rows: list[dict[str, Any]]) -> None:
    """The group size of the calls of a group whose dump lists no ranks, from that group's all-gathers and
    reduce-scatters (output over input elements, or input over output), where they agree. A ratio of 1
    beside others is left out: the output recorded as one rank's part (as for the all-gathers of a full
    state dict over gloo, ``[[48, 128]]`` into ``[[1, 48, 128]]``), since a group of one is a group of its
    own."""
    seen: dict[str | None, set[int]] = {}
    for r in rows:
        if r["group_size"] is None and r["op"] in ("all_gather", "reduce_scatter"):
            big, small = ((r["out_nelems"], r["in_nelems"]) if r["op"] == "all_gather"
                          else (r["in_nelems"], r["out_nelems"]))
            if big and small and big % small == 0:
                seen.setdefault(r["group"], set()).add(big // small)
    sizes = {g: next(iter(s - {1} or s)) for g, s in seen.items() if len(s - {1} or s) == 1}
    for r in rows:
        if r["group_size"] is None and r["group"] in sizes and r["op"] not in ("send", "recv"):
            r["group_size"] = sizes[r["group"]]
            r["group_from"] = "the group's all-gathers"


def members_across_dumps(results: list[ParseResult]) -> None:
    """The members of each group that no dump lists and no gather sizes (gloo's dumps list no group's
    ranks; a group of all-reduces only), from the dumps read together: every member of a group runs each
    of its collectives, recorded under the group's ``collective_seq_id``, so the ranks whose dumps record
    one of them are its members. A member's ring buffer may have let the oldest go: the call recorded by
    the most ranks counts. Groups of one rank are left unsized. Said in each dump's ``meta["notes"]``."""
    dumps = [r for r in results if r.meta.get("format") == FORMAT and r.meta.get("rank") is not None]
    if len({r.meta["rank"] for r in dumps}) < 2:
        return
    holders: dict[tuple[str, int], set[int]] = {}
    for res in dumps:
        for row in res.rows:
            seq = row.get("seq")
            if row["group_size"] is None and row["group"] is not None and isinstance(seq, int) \
                    and row["op"] not in ("send", "recv"):
                holders.setdefault((row["group"], seq), set()).add(res.meta["rank"])
    members: dict[str, tuple[int, ...]] = {}
    for (group, _), ranks in holders.items():
        if len(ranks) > len(members.get(group, ())):
            members[group] = tuple(sorted(ranks))
    members = {g: m for g, m in members.items() if len(m) > 1}
    if not members:
        return
    listed = ", ".join(f"{g!r} {{{', '.join(map(str, m))}}}" for g, m in sorted(members.items())[:4])
    note = (f"the groups no dump lists are the ranks whose dumps record their calls ({listed}"
            f"{' …' if len(members) > 4 else ''}): give --n if some ranks' dumps are not read")
    for res in dumps:
        res.meta.setdefault("notes", []).append(note)
        for row in res.rows:
            m = members.get(row["group"]) if row["group_size"] is None else None
            if m is not None and row["op"] not in ("send", "recv"):
                row["group_size"], row["group_ranks"] = len(m), ",".join(map(str, m))
                row["group_from"] = "the dumps that record the group's calls"


def parse_bytes(data: bytes, file: str, *, strict: bool = False) -> ParseResult:
    """A dump's bytes, JSON or its pickle, → :func:`parse_document`; a text that is not JSON, or a pickle that
    names a callable, is refused naming the file."""
    doc = load_data(data, file) if is_pickle(data) else json_document(data, file)
    return parse_document(doc, file, strict=strict)
