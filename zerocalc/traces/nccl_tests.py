"""nccl-tests ``*_perf`` output (text, both column layouts, and ``-J`` JSON) → one row per size.

nccl-tests ``src/util.cu`` and ``doc/PERFORMANCE.md``: ``size`` is the total bytes, ``count`` the
NCCL count argument (per-rank send count for all_gather); then out-of-place and in-place
``time(us) algbw busbw #wrong``. Before Aug 2022 there was no ``root`` column, an ``error``
column instead of ``#wrong`` and no ``redop`` for all_gather/reduce_scatter. The op comes
from the ``<op>_perf`` name in the file (command line, ``Collective test starting``) or,
failing that, in the file name; the group size from the ``#  Rank`` lines, or for
all_gather/reduce_scatter from ``size / (count × elem_bytes)``.
"""

from __future__ import annotations

import os
import re
from typing import Any, TextIO

import orjson

from zerocalc.errors import TraceFormatError
from zerocalc.traces.records import ParseResult, bad
from zerocalc.traces.schema import (
    DTYPE_BYTES,
    NCCL_TESTS_DTYPES,
    NCCL_TESTS_JSON_BODY,
    NCCL_TESTS_JSON_KEYS,
    NCCL_TESTS_LAYOUTS,
    NCCL_TESTS_OPS,
)

FORMAT = "nccl_tests"
_PERF = re.compile(r"\b(" + "|".join(sorted(NCCL_TESTS_OPS, key=len, reverse=True)) + r")_perf\b")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid")
_NUM = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _float(tok: str) -> float | None:
    return float(tok) if _NUM.match(tok) else None


def parse_row(line: str, *, file: str = "<line>", lineno: int | None = None) -> dict[str, Any] | None:
    """One result row → dict of the layout's fields; ``None`` for comments and other lines.

    Raises :class:`TraceFormatError` for a line that starts like a result row (two integers)
    but fits no known layout.
    """
    toks = line.split()
    if len(toks) < 3 or not toks[0].isdigit() or not toks[1].isdigit():
        return None
    for layout, cols in NCCL_TESTS_LAYOUTS.items():
        if len(toks) < len(cols) or len(toks) > len(cols) + 2:  # + optional timestamp
            continue
        rec: dict[str, Any] = {"layout": layout}
        ok = True
        for col, tok in zip(cols, toks, strict=False):
            if col in ("size_bytes", "count"):
                if not tok.isdigit():
                    ok = False
                    break
                rec[col] = int(tok)
            elif col in ("type", "redop"):
                if _float(tok) is not None:
                    ok = False
                    break
                rec[col] = tok
            elif col == "root":
                if not tok.lstrip("-").isdigit():
                    ok = False
                    break
                rec[col] = int(tok)
            elif col.endswith("_wrong"):
                rec[col] = None if tok == "N/A" else _float(tok)
                if rec[col] is None and tok != "N/A":
                    ok = False
                    break
            else:
                v = _float(tok)
                if v is None:
                    ok = False
                    break
                rec[col] = v
        if ok:
            return rec
    raise TraceFormatError(file, lineno, "result row fits no nccl-tests column layout")


def _to_row(rec: dict[str, Any], op_key: str | None, p: int | None, file: str, lineno: int) -> dict[str, Any]:
    dtype = NCCL_TESTS_DTYPES.get(rec["type"], rec["type"])
    eb = DTYPE_BYTES.get(dtype)
    count = rec["count"]
    spec = NCCL_TESTS_OPS.get(op_key) if op_key else None
    op = spec[0] if spec else "other"
    if spec and op_key in ("all_gather", "reduce_scatter") and eb and count:
        q, r = divmod(rec["size_bytes"], count * eb)
        if r == 0 and (p is None or p == q):
            p = q
    def scale(f: str) -> int | None:
        return count if f == "1" else (count * p if p is not None else None)
    t = rec["oop_time_us"]
    return {
        "file": file, "rank": None, "step": None, "op": op, "dtype": dtype, "elem_bytes": eb,
        "in_nelems": scale(spec[1]) if spec else None, "out_nelems": scale(spec[2]) if spec else None,
        "group_size": p, "group": None, "start_s": None,
        "duration_s": t * 1e-6 if t is not None else None, "source_line": lineno,
        "count": count, "size_bytes": rec["size_bytes"], "redop": rec.get("redop"), "root": rec.get("root"),
        "algbw_GBps": rec["oop_algbw"], "busbw_GBps": rec["oop_busbw"],
        "inplace_duration_s": rec["ip_time_us"] * 1e-6 if rec.get("ip_time_us") is not None else None,
        "inplace_algbw_GBps": rec.get("ip_algbw"), "inplace_busbw_GBps": rec.get("ip_busbw"),
        "wrong": rec.get("oop_wrong"), "layout": rec["layout"],
    }


def parse(stream: TextIO, file: str, *, strict: bool = False) -> ParseResult:
    """Stream a text ``*_perf`` output."""
    res = ParseResult(meta={"format": FORMAT})
    recs: list[tuple[int, dict[str, Any]]] = []
    ranks: set[int] = set()
    op_key = None
    for lineno, line in enumerate(stream, 1):
        if op_key is None and "_perf" in line:
            m = _PERF.search(line)
            op_key = m[1] if m else None
        if line.lstrip().startswith("#"):
            m = _RANK.match(line)
            if m:
                ranks.add(int(m[1]))
            continue
        try:
            rec = parse_row(line, file=file, lineno=lineno)
        except TraceFormatError as exc:
            bad(file, lineno, exc.reason, strict, res.skipped)
            continue
        if rec is not None:
            recs.append((lineno, rec))
    if op_key is None:
        m = _PERF.search(os.path.basename(file))
        op_key = m[1] if m else None
    p = len(ranks) if ranks else None
    res.rows = [_to_row(rec, op_key, p, file, ln) for ln, rec in recs]
    sizes = {r["group_size"] for r in res.rows if r["group_size"] is not None}
    res.meta.update(rank=None, world_size=sizes.pop() if len(sizes) == 1 else p, backend="nccl",
                    test=f"{op_key}_perf" if op_key else None)
    return res


def parse_json(doc: Any, file: str, *, strict: bool = False) -> ParseResult:
    """A ``-J`` JSON report (nccl-tests util.cu, JSON_FILE_VERSION 2)."""
    res = ParseResult(meta={"format": FORMAT})
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise TraceFormatError(file, None, "nccl-tests JSON without a 'results' list")
    args = doc.get("args") or []
    m = _PERF.search(" ".join(a for a in args if isinstance(a, str))) if isinstance(args, list) else None
    op_key = m[1] if m else None
    devices = (doc.get("config") or {}).get("devices") if isinstance(doc.get("config"), dict) else None
    p = len(devices) if isinstance(devices, list) and devices else None
    for i, r in enumerate(doc["results"]):
        try:
            rec: dict[str, Any] = {"layout": "json"}
            for k, col in NCCL_TESTS_JSON_KEYS.items():
                rec[col] = r.get(k)
            for side, pre in (("out_of_place", "oop_"), ("in_place", "ip_")):
                body = r.get(side) or {}
                for k, col in NCCL_TESTS_JSON_BODY.items():
                    if k in body:
                        rec[pre + col] = body[k]
            if not isinstance(rec["size_bytes"], int) or not isinstance(rec["count"], int):
                raise TraceFormatError(file, i, "result without integer size/count")
            if not isinstance(rec["type"], str):
                raise TraceFormatError(file, i, "result without a type")
            rec.setdefault("oop_time_us", None)
            rec.setdefault("oop_algbw", None)
            rec.setdefault("oop_busbw", None)
            if isinstance(rec.get("root"), str) and rec["root"].strip().lstrip("-").isdigit():
                rec["root"] = int(rec["root"])
            res.rows.append(_to_row(rec, op_key, p, file, i))
        except (TraceFormatError, AttributeError, TypeError) as exc:
            reason = exc.reason if isinstance(exc, TraceFormatError) else f"malformed result ({exc})"
            bad(file, i, reason, strict, res.skipped)
    res.meta.update(rank=None, world_size=p, backend="nccl", test=f"{op_key}_perf" if op_key else None)
    return res


def parse_json_bytes(data: bytes, file: str, *, strict: bool = False) -> ParseResult:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(file, None, f"not valid JSON ({exc})") from None
    return parse_json(doc, file, strict=strict)
