"""The kept real runs (tests/data/traces/real-runs) and the plain json/gzip counter beside them."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

RUNS = Path(__file__).parent / "data" / "traces" / "real-runs"


@functools.cache
def count_calls():
    """The module count_calls.py of the runs' directory (no zerocalc)."""
    spec = importlib.util.spec_from_file_location("count_calls", RUNS / "count_calls.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
