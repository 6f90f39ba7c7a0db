"""Element types and their width in bytes: one table for the model, the CLI and the traces.

Canonical names follow the trace table's ``dtype`` column (NCCL ``ncclDataType_t`` in
``nccl.h``: int8 … bf16, fp8e4m3, fp8e5m2); common spellings are accepted as aliases.
"""

from __future__ import annotations

from typing import Final

from zerocalc.errors import UnknownNameError

#: Canonical dtype name → bytes per element.
DTYPE_BYTES: Final[dict[str, int]] = {
    "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "fp8e4m3": 1, "fp8e5m2": 1, "bool": 1,
}

#: Other spellings a user may type → canonical name.
ALIASES: Final[dict[str, str]] = {
    "fp8": "fp8e4m3", "float8": "fp8e4m3", "half": "fp16", "float16": "fp16", "bfloat16": "bf16",
    "float": "fp32", "float32": "fp32", "double": "fp64", "float64": "fp64",
}


def canonical_dtype(name: str, option: str = "--dtype") -> str:
    """``"bfloat16"`` → ``"bf16"``; :class:`UnknownNameError` for a name that is neither."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise UnknownNameError("dtype", str(name), (*DTYPE_BYTES, *ALIASES))
    return key


def dtype_bytes(name: str) -> int:
    """Bytes per element of a dtype name or alias (``fp16`` → 2)."""
    return DTYPE_BYTES[canonical_dtype(name)]
