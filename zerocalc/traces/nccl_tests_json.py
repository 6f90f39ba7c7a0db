"""An nccl-tests ``-J`` JSON report (nccl-tests 2.17.x on) → the rows and run facts its text output gives.

nccl-tests ``src/util.cu`` (``JSON_FILE_VERSION`` 1-3) writes one run per report: the command line
(``args``), the process environment (``env``), ``ncclGetVersion``'s code (``nccl_version``), the run's
options and one ``devices`` entry per process (``config``), and per size one ``results`` entry whose
``out_of_place`` and ``in_place`` objects hold the cells a text row prints (``time``, or ``cpu_time``
under ``-C``; ``alg_bw``, ``bus_bw``, ``nwrong``: key → column tables
:data:`~zerocalc.traces.schema.NCCL_TESTS_JSON_KEYS` and ``NCCL_TESTS_JSON_BODY``). The report is
decoded whole and its run put into the text reader's run (:class:`zerocalc.traces.nccl_tests._Run`), so
that its rows and ``meta["runs"]`` entry are built as :func:`zerocalc.traces.nccl_tests.parse` builds a
text run's. Used by :mod:`zerocalc.traces.reader` for the ``nccl_tests_json`` format.
"""

from __future__ import annotations

import os
from typing import Any

from zerocalc.errors import TraceFormatError
from zerocalc.traces.nccl_tests import _PERF, FORMAT, _Run, _tabulate, _to_row, nccl_version_from_code
from zerocalc.traces.nccl_tests_rows import CPUTIME_SUFFIX
from zerocalc.traces.records import COUNT_LIMIT, INT_LIMIT, ParseResult, bad, json_document
from zerocalc.traces.schema import NCCL_TESTS_JSON_BODY, NCCL_TESTS_JSON_KEYS


def parse_json(doc: Any, file: str, *, strict: bool = False) -> ParseResult:
    """A ``-J`` JSON report (nccl-tests ``src/util.cu``, ``JSON_FILE_VERSION`` 1-3, v2.17.x on): one run,
    its rows and its entry in ``meta["runs"]`` as :func:`~zerocalc.traces.nccl_tests.parse` gives them.
    The op comes from ``args`` (the command line) or the file name; the group size from ``config``:
    ``devices`` lists one entry per process (``parseRankInfo`` reads the first ``# Rank`` line of each
    process's block), each process driving ``nthreads`` × ``ngpus`` ranks; the NCCL version from
    ``nccl_version`` (``ncclGetVersion``'s code, :func:`nccl_version_from_code`); the NCCL variables from
    ``env`` (the process environment); ``-g``, ``-a`` and ``-G`` from ``ngpus``,
    ``aggregated_iterations`` and ``graph``."""
    res = ParseResult(meta={"format": FORMAT})
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise TraceFormatError(file, None, "nccl-tests JSON without a 'results' list")
    args = doc.get("args") or []
    m = _PERF.search(" ".join(a for a in args if isinstance(a, str))) if isinstance(args, list) else None
    name_op = _PERF.search(os.path.basename(file))
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    run = _Run(None, op_key=m[1] if m else name_op[1] if name_op else None)
    _json_config(run, config)
    code = doc.get("nccl_version")
    if isinstance(code, int) and not isinstance(code, bool) and code > 0:
        run.nccl_version = nccl_version_from_code(code)
    for entry in doc.get("env") if isinstance(doc.get("env"), list) else []:
        name, eq, value = entry.partition("=") if isinstance(entry, str) else ("", "", "")
        if eq and name.startswith("NCCL_") and value:
            run.env[name] = (value, None, 3)  # the process's own environment: what NCCL read
    for i, r in enumerate(doc["results"]):
        try:
            rec = _result(r, file)
            _to_row(rec, run.op_key, None, file, i)  # a result that does not fit fails here, not later
            run.recs.append((i, rec))
        except (TraceFormatError, AttributeError, TypeError) as exc:
            reason = exc.reason if isinstance(exc, TraceFormatError) else f"malformed result ({exc})"
            bad(file, None, f"result {i}: {reason}", strict, res.skipped)
    _tabulate([run], file, res)
    return res


def _whole(v: Any) -> bool:
    """Whether ``v`` is a JSON integer of a 64-bit count (not a boolean)."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < COUNT_LIMIT


def _result(r: Any, file: str) -> dict[str, Any]:
    """One entry of ``results`` as a row's record; :class:`TraceFormatError` saying which field is not of
    nccl-tests' type (``src/util.cu`` writes ``size`` and ``count`` as integers, ``type`` / ``redop`` as
    names, ``root`` as a padded integer, each side's figures as numbers); the caller names the result."""
    def refuse(what: str) -> TraceFormatError:
        return TraceFormatError(file, None, what)

    if not isinstance(r, dict):
        raise refuse("not an object")
    rec: dict[str, Any] = {"layout": "json"}
    for k, col in NCCL_TESTS_JSON_KEYS.items():
        rec[col] = r.get(k)
    for side, pre in (("out_of_place", "oop_"), ("in_place", "ip_")):
        body = r.get(side) or {}
        if not isinstance(body, dict):
            raise refuse(f"{side} {body!r:.40} is not an object")
        if "cpu_time" in body:  # -C (util.cu: the key names what the time is)
            rec["layout"] = "json" + CPUTIME_SUFFIX
        for k, col in NCCL_TESTS_JSON_BODY.items():
            if k in body:
                v = body[k]
                if not (v is None or isinstance(v, int | float) and not isinstance(v, bool)):
                    raise refuse(f"{side}.{k} {v!r} is not a number")
                rec[pre + col] = v
    if not _whole(rec["size_bytes"]) or not _whole(rec["count"]):
        raise refuse(f"size {rec['size_bytes']!r:.30} / count {rec['count']!r:.30} are not whole numbers "
                     "a 64-bit count holds")
    if not isinstance(rec["type"], str):
        raise refuse("without a type")
    if rec["redop"] is not None and not isinstance(rec["redop"], str):
        raise refuse(f"redop {rec['redop']!r:.30} is not a name")
    root = rec.get("root")
    if isinstance(root, str) and root.strip().lstrip("-").isdigit():
        root = rec["root"] = int(root)
    if root is not None and (isinstance(root, bool) or not isinstance(root, int) or abs(root) >= INT_LIMIT):
        raise refuse(f"root {root!r:.30} is not an integer")
    rec.setdefault("oop_time_us", None)
    rec.setdefault("oop_algbw", None)
    rec.setdefault("oop_busbw", None)
    return rec


def _json_config(run: _Run, config: dict[str, Any]) -> None:
    """What a JSON report's ``config`` says of the run: its ranks, their devices, ``-g``, ``-a``, ``-G``."""

    def whole(key: str) -> int | None:
        v = config.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    run.gpus_per_thread, run.agg_iters = whole("ngpus"), whole("aggregated_iterations")
    run.graph = whole("graph")
    devices = config.get("devices")
    if not isinstance(devices, list) or not devices:
        return
    per = (whole("nthreads") or 1) * (run.gpus_per_thread or 1)
    for k, d in enumerate(devices):
        first = d.get("rank") if isinstance(d, dict) and isinstance(d.get("rank"), int) else k * per
        host = d.get("hostname") if isinstance(d, dict) else None
        gpu = d.get("device_info") if isinstance(d, dict) else None
        for rank in range(first, first + per):
            run.ranks.add(rank)
            if isinstance(host, str) and isinstance(gpu, str) and host and gpu.strip():
                # the process's other GPUs are not listed: their bus ids unknown (never "shared")
                bus = str(d.get("device_hex") or "") if rank == first else ""
                run.devices[rank] = (host, gpu.strip(), bus)


def parse_json_bytes(data: bytes, file: str, *, strict: bool = False) -> ParseResult:
    return parse_json(json_document(data, file), file, strict=strict)
