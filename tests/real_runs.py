"""The kept real runs (tests/data/traces/real-runs) and the plain json/gzip counter beside them."""

from __future__ import annotations

import functools
import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

RUNS = Path(__file__).parent / "data" / "traces" / "real-runs"


@functools.cache
def count_calls():
    """The module count_calls.py of the runs' directory (no zerocalc)."""
    spec = importlib.util.spec_from_file_location("count_calls", RUNS / "count_calls.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def forward_reductions(case: str, key: str = "forward_reductions") -> Counter:
    """(elements, op around it) → calls of the reductions run in a forward pass over every rank and step of a
    run, as count_calls.py counted them (expected.json's ``forward_reductions``; ``key``
    ``"forward_gathers"``: of its all-gathers)."""
    e = json.loads((RUNS / case / "expected.json").read_text())
    out: Counter = Counter()
    for r in e["ranks"].values():
        for s in r["steps"].values():
            for f in s.get(key, []):
                _, elems, _, around = f.split(" ")
                out[(int(elems), around)] += 1
    return out


def forward_gathers(case: str) -> Counter:
    """The same of the all-gathers run in a forward pass (``forward_gathers``), by elements in (a shard)."""
    return forward_reductions(case, "forward_gathers")


def recompute_gathers(case: str) -> Counter:
    """The same of the all-gathers run in a reentrant checkpoint's recompute (``recompute_gathers``), by
    elements in (a shard) and the checkpoint's node."""
    return forward_reductions(case, "recompute_gathers")


def gathered_and_scattered(case: str, ranks: int = 4) -> list[tuple[dict, Counter]]:
    """Each rank's steps of a run as count_calls.py counted them (expected.json), each with the elements it
    all-gathers (a call's whole vector: its shard times ``ranks``) and reduce-scatters (a call's input)."""
    e = json.loads((RUNS / case / "expected.json").read_text())
    out = []
    for r in e["ranks"].values():
        for s in r["steps"].values():
            per: Counter = Counter()
            for row in s["c10d"]:
                if "allgather" in row["op"]:
                    per["all_gather"] += row["in_elems"] * ranks * row["calls"]
                elif "reduce_scatter" in row["op"]:
                    per["reduce_scatter"] += row["in_elems"] * row["calls"]
            out.append((s, per))
    return out


#: the compressed traces of a run past which its recounts run in the slow suite alone (the checkpointed GPT-2
#: runs', 1.9 to 2.6 MB: 3 to 4 s a recount, the default suite's largest per-run cost)
HEAVY_BYTES = 1_800_000


def _heavy(case: str) -> bool:
    return sum(f.stat().st_size for f in (RUNS / case).glob("rank*.json.gz")) > HEAVY_BYTES


def sampled(cases: list[str], every: int = 3) -> list:
    """``cases`` for a test that recounts every run's traces: one in ``every`` (in name order) in the default
    run but those of more than :data:`HEAVY_BYTES` of traces, the others marked slow (``python -m pytest -m
    slow`` runs them): those recounts, a second or more a run, are the default suite's main cost as runs are
    added."""
    return [c if i % every == 0 and not _heavy(c) else pytest.param(c, marks=pytest.mark.slow)
            for i, c in enumerate(cases)]
