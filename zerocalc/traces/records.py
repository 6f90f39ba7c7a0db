"""What a format parser hands back: rows, file metadata and the lines it skipped.

Parsers collect plain dicts (fast, no pandas), or, for formats with millions of
rows, whole columns; the reader turns them into the canonical table. Lenient mode
counts skipped lines and keeps the first few examples; strict mode raises
:class:`~zerocalc.errors.TraceFormatError` at the first.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from zerocalc.errors import TraceFormatError

#: How many skipped lines are kept as examples, per read.
MAX_EXAMPLES = 5


#: A size or count at or past this is held by no cell of the table's 64-bit integer columns: a trace that
#: prints one (nccl-tests' ``size_t``, a comms log's call count) has a line no reader takes.
COUNT_LIMIT = 2**63
#: A rank or root at or past this (an ``int`` where torch.distributed and nccl-tests print it) is no figure
#: of a trace.
INT_LIMIT = 2**31

@dataclass
class SkipLog:
    """Lines a lenient read could not use: a count, a count per reason and the first examples."""

    count: int = 0
    by_reason: Counter = field(default_factory=Counter)
    examples: list[tuple[str, int | None, str]] = field(default_factory=list)

    def add(self, file: str, line: int | None, reason: str) -> None:
        self.count += 1
        self.by_reason[reason] += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append((file, line, reason))

    def example_text(self, k: int = 3) -> str:
        """The first ``k`` examples as ``file:line: reason`` (``file: reason`` where no line is known: an
        entry of a JSON document), joined by ``; ``."""
        return "; ".join(f"{f}:{ln}: {why}" if ln is not None else f"{f}: {why}"
                         for f, ln, why in self.examples[:k])

    def counted(self) -> str:
        """``3 unreadable lines``: ``entries`` where no example has a line (entries of JSON documents),
        ``lines and entries`` where some have."""
        lined = {ln is not None for _, ln, _ in self.examples} or {True}
        noun = ("line", "lines") if lined == {True} else ("entry", "entries") if lined == {False} else (
            "line or entry", "lines and entries")
        return f"{self.count} unreadable {noun[self.count != 1]}"

    def merge(self, other: SkipLog) -> None:
        self.count += other.count
        self.by_reason.update(other.by_reason)
        room = MAX_EXAMPLES - len(self.examples)
        if room > 0:
            self.examples.extend(other.examples[:room])

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0


@dataclass
class ParseResult:
    """One file's rows, its metadata and its skip log.

    The rows are either ``rows`` (dicts with canonical and extra keys) or ``columns``
    (column name → equally long sequences, in table order), never both.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    skipped: SkipLog = field(default_factory=SkipLog)
    columns: dict[str, Any] | None = None

    def __len__(self) -> int:
        if self.columns is not None:
            return len(self.columns["file"])
        return len(self.rows)


def bad(file: str, line: int | None, reason: str, strict: bool, skipped: SkipLog) -> None:
    """Record an unusable line: raise in strict mode, count it otherwise."""
    if strict:
        raise TraceFormatError(file, line, reason)
    skipped.add(file, line, reason)


def json_document(data: bytes, file: str) -> Any:
    """The decoded JSON of a file's bytes; :class:`TraceFormatError` naming the file where they are not
    JSON."""
    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(file, None, f"not valid JSON ({exc})") from None
