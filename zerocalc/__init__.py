"""zerocalc: what a ZeRO-style sharding scheme costs on the wire, in time and in memory.

Three kinds of evidence side by side: a symbolic derivation (sympy), a numpy
simulation of ranks that execute each scheme, and real traces checked against
the prediction. The public API is re-exported here explicitly.
"""

from zerocalc.errors import (
    ConfigError,
    TraceFormatError,
    TraceMismatchError,
    UnknownNameError,
    ZerocalcError,
)
from zerocalc.units import format_bytes, parse_count

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "TraceFormatError",
    "TraceMismatchError",
    "UnknownNameError",
    "ZerocalcError",
    "__version__",
    "format_bytes",
    "parse_count",
    "read_traces",
    "TraceSet",
    # core model
    "Algorithm",
    "Collective",
    "Group",
    "Phase",
    "SCHEMES",
    "SCHEME_NAMES",
    "Scheme",
    "Topology",
    "bytes_sent_per_rank",
    "evaluate",  # the module zerocalc.evaluate; the function is zerocalc.evaluate.evaluate
    "get_scheme",
    "get_topology",
    "model_bytes_per_rank",
    "model_state_bytes",
    # feasibility simulation
    "FeasibilityConfig",
    "run_feasibility",
    # measured against predicted
    "check",
    "fit_alpha_beta",
    # the design-review PDF
    "ReportConfig",
    "write_report",
]

# Trace ingestion pulls in orjson and, on use, pandas: imported on first access
# so that ``import zerocalc`` stays cheap.
_LAZY = {"read_traces": "zerocalc.traces", "TraceSet": "zerocalc.traces"}
# The core model imports sympy (about half a second), the report matplotlib: also on first access.
_LAZY.update(
    {name: "zerocalc.collectives" for name in ("Algorithm", "Collective", "bytes_sent_per_rank")}
    | {name: "zerocalc.schemes" for name in ("Group", "Phase", "SCHEMES", "SCHEME_NAMES", "Scheme",
                                             "get_scheme")}
    | {name: "zerocalc.topology" for name in ("Topology", "get_topology")}
    | {"model_bytes_per_rank": "zerocalc.evaluate"}
    | {"model_state_bytes": "zerocalc.memory"}
    | {name: "zerocalc.feasibility" for name in ("FeasibilityConfig", "run_feasibility")}
    | {name: "zerocalc.validate" for name in ("check", "fit_alpha_beta")}
    | {name: "zerocalc.report" for name in ("ReportConfig", "write_report")}
)


def __getattr__(name: str):
    if name == "evaluate":  # a submodule: importing it makes it this attribute anyway
        import importlib

        return importlib.import_module("zerocalc.evaluate")
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'zerocalc' has no attribute {name!r}")
