"""Trace ingestion: NCCL debug logs, PyTorch profiler traces and Flight Recorder dumps, nccl-tests and
DeepSpeed comms logs.

``read_traces(paths)`` returns a :class:`TraceSet` whose ``table`` has one row per
collective call per rank in the canonical columns of :mod:`zerocalc.traces.schema`.
One module per format; the key → column tables live in ``schema``.
"""

from zerocalc.traces.detect import FORMATS, detect_format
from zerocalc.traces.reader import TraceSet, read_file, read_traces
from zerocalc.traces.records import SkipLog
from zerocalc.traces.schema import CANONICAL_COLUMNS, OPS

__all__ = ["CANONICAL_COLUMNS", "FORMATS", "OPS", "SkipLog", "TraceSet", "detect_format", "read_file",
           "read_traces"]
