"""Data-only pickles, read without running code: PyTorch's Flight Recorder dump as a watchdog timeout
writes it (``TORCH_FR_DUMP_TEMP_FILE`` / ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` + rank, the bytes
``torch._C._distributed_c10d._dump_fr_trace()`` returns): dicts, lists, tuples, strings, numbers, ``None``
and booleans, no class or function.

A pickle builds objects by naming the callables that make them (its ``GLOBAL``, ``STACK_GLOBAL``, ``INST``,
``OBJ`` and extension-registry opcodes, every one resolved by ``Unpickler.find_class``) or through
persistent IDs (``Unpickler.persistent_load``); loading it imports and calls them, which is how a pickle
runs code. Here both refuse whatever they are asked for (the Python documentation's "Restricting
Globals"), so a pickle loads from its own data opcodes alone, and one that names a callable is refused
naming it, before anything is called.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from zerocalc.errors import TraceFormatError

#: The first byte of a pickle of protocol 2 or later (``PROTO``), followed by its protocol.
PROTO = b"\x80"


def is_pickle(head: bytes) -> bool:
    """Whether bytes open as a pickle of protocol 2-5 (its ``PROTO`` opcode)."""
    return head[:1] == PROTO and len(head) > 1 and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")


class _NamedCallable(Exception):
    """The pickle names a callable (or a persistent ID) that a data-only load refuses."""


class _DataOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise _NamedCallable(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _NamedCallable(f"a persistent ID ({pid!r:.40})")


def load_data(data: bytes, file: str) -> Any:
    """The data a data-only pickle holds, its tuples as lists (as the JSON variant of the same dump has
    them). :class:`TraceFormatError` naming the file where it names a callable, or is no whole pickle."""
    try:
        return _lists(_DataOnly(io.BytesIO(data)).load())
    except _NamedCallable as exc:
        raise TraceFormatError(file, None, (
            f"a pickle that names {exc}: not loaded, as that would call it; a Flight Recorder dump holds "
            "plain data alone")) from None
    except RecursionError:
        raise TraceFormatError(file, None, "a pickle nested deeper than a Flight Recorder dump is") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, UnicodeDecodeError, OverflowError, MemoryError) as exc:
        raise TraceFormatError(file, None, f"not a whole pickle ({type(exc).__name__}: {exc})") from None


def _lists(value: Any) -> Any:
    """``value`` with every tuple a list, in place where it is a dict or a list."""
    if isinstance(value, dict):
        for key, v in value.items():
            if isinstance(v, dict | list | tuple):
                value[key] = _lists(v)
        return value
    if isinstance(value, list | tuple):
        out = value if isinstance(value, list) else list(value)
        for i, v in enumerate(out):
            if isinstance(v, dict | list | tuple):
                out[i] = _lists(v)
        return out
    return value
