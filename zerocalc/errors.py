"""The zerocalc error tree.

Every error zerocalc raises on bad input is a :class:`ZerocalcError` and also the
matching builtin (``ValueError``, ``KeyError``...), so callers can catch either.
The CLI turns any of them into one line on stderr and exit code 2.
"""

from __future__ import annotations


class ZerocalcError(Exception):
    """Base class of every error zerocalc raises on purpose."""


class ConfigError(ZerocalcError, ValueError):
    """An impossible or malformed configuration (N = 0, Ψ < 0, a bad option value).

    ``option`` names the offending option or field so the message can point at it; options that
    are only wrong together are joined by ``/`` (``--n/--gpus-per-node``), and the CLI names those
    of them the user gave.
    """

    def __init__(self, message: str, option: str | None = None) -> None:
        self.option, self.message = option, message
        super().__init__(f"{option}: {message}" if option else message)

    def __reduce__(self):
        return (type(self), (self.message, self.option))


class UnpricedOpError(ConfigError):
    """A collective the chosen library's cost model does not price (all_to_all under RCCL, send/receive
    before NCCL 2.7): ``check`` reports such a sweep of a file unpriced and prices the file's others; alone
    in its files it is refused; ``table`` leaves the schemes that need it unpriced (``n/a``)."""


class RestrictedOpError(UnpricedOpError):
    """A collective no (algorithm, protocol) pair that ``NCCL_ALGO`` / ``NCCL_PROTO`` allow can run on the
    machine (``NCCL_ALGO=Tree`` for a reduce-scatter): NCCL fails such a call, so it is unpriced as
    :class:`UnpricedOpError` says; where it leaves nothing to price, the restriction is refused."""


class UnknownNameError(ZerocalcError, KeyError):
    """A scheme, topology, collective, algorithm or dtype name that zerocalc does not know."""

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...]) -> None:
        self.kind, self.name, self.known = kind, name, tuple(known)
        super().__init__(kind, name)

    def __reduce__(self):
        return (type(self), (self.kind, self.name, self.known))

    def __str__(self) -> str:
        return f"unknown {self.kind} {self.name!r}; known: {', '.join(self.known)}"


class TraceFormatError(ZerocalcError, ValueError):
    """A trace that cannot be read: names the file, the line where it has one, and the reason (which names
    the entry of a JSON document)."""

    def __init__(self, file: str, line: int | None, reason: str) -> None:
        self.file, self.line, self.reason = str(file), line, reason
        where = f"{self.file}:{line}" if line is not None else self.file
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):  # rebuilt from its fields when it crosses a process boundary
        return (type(self), (self.file, self.line, self.reason))


class TraceMismatchError(ZerocalcError, ValueError):
    """Traces that contradict each other or the options (mixed world sizes, a Ψ the trace refutes)."""
