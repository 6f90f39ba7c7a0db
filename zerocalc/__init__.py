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
]
