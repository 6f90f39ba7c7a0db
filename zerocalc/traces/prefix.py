"""Launcher prefixes in front of a log line, and how to look past them.

Launchers tag each line of a process's output: OpenMPI ``--tag-output`` ``[1,0]<stdout>:``,
``mpirun``/``torchrun`` ``[0]`` or ``[0]:``, ``srun -l`` ``0:``, ``pdsh`` ``host:``, Ray ``(pid=123,
ip=10.0.0.1)``, and a log collector its RFC 3339 time (``kubectl logs --timestamps``, ``docker logs
-t``: ``2024-07-19T05:12:33.123456789Z``; a Kubernetes node's container log file, CRI format, its
stream and whether the line is whole after it: ``2024-07-19T05:12:33.123456789Z stdout F``), Docker
Compose its service's container name, padded, and a bar (``docker compose up`` / ``docker compose
logs``: ``nccl-1  | ``, Compose v1 ``nccl_1  | ``: a name ending in its replica number, or one padded to
a longer name's width; not DeepSpeed's ``broadcast | [Caller Func: f]``), each wrapped in its terminal
colour codes ``ESC[36m`` … ``ESC[0m`` when written to a terminal); a post quoting an output in a
Markdown reply puts ``>`` before each line (GitHub's quote mark: NVIDIA/nccl-tests issue 287); a job
platform's log viewer its time in brackets (``[2026-04-28 14:14:42]``, a date and a time, no more), as a
filter stamps each line with one (moreutils ``ts``: ``Jul 19 05:12:33``, ``[2024-07-19 05:12:33]``,
``00:00:12``, in brackets or not); they may be stacked. Another bracket with a space inside is not one (a
shell prompt ``[user@host dir]$``), nor a bare number (a table's first column). The NCCL log parser
searches past any prefix instead.

OpenMPI ``--tag-output`` tags each write a process makes, not each line: a result row that nccl-tests
prints with several ``printf`` calls (``src/common.cu``: the lead columns, then each side's cells) comes
out as ``8  2  float  sum  -1[1,0]<stdout>:    85.14 ...``. :func:`inner_tags` takes such tags out of a
line's body: the bracket and Ray kinds wherever they are (no cell of a row holds a bracket or a
parenthesis), a ``host:`` or ``0:`` label only as a word of its own (no cell ends with a colon).
"""

from __future__ import annotations

import re

#: Blanks a web page's copy of an output holds for its spaces (HTML's ``&nbsp;``, U+00A0; U+202F; U+3000),
#: each read as a space by the detector (:mod:`zerocalc.traces.detect`) and the nccl-tests reader.
WIDE_SPACES = ("\u00a0", "\u202f", "\u3000")
#: A syslog or journald line's head (RFC 3164 ``Jul 19 05:12:33 host prog[123]: ``, ``journalctl``'s
#: ``short-precise`` fraction and ``short-iso`` time): time, host, then the program's tag and colon; a
#: tag without a letter is not one (a table's cells never end with a colon), nor a head without a tag.
_SYSLOG = (r"(?:(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
           r"[ \t]{1,2}\d{1,2}[ \t]\d\d:\d\d:\d\d(?:\.\d+)?"
           r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
           r"[ \t]+[\w.\-]+[ \t]+[\w.\-/]*[A-Za-z][\w.\-/]*(?:\[\d+\])?:(?=[ \t]|$)")
#: Python ``logging``'s heads: ``basicConfig``'s ``%(levelname)s:%(name)s:`` (``INFO:root:``, the message
#: right after it), and ``%(asctime)s - [%(name)s - ]%(levelname)s - `` (``2024-07-19 05:12:33,123 - INFO -
#: ``). Each needs a level name, so no row's cells can pass for one.
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
_PYLOG = (_LEVEL + r":[\w.\-]+:"
          r"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[ \t]+-[ \t]+[\w.\-]+)?[ \t]+-[ \t]+"
          + _LEVEL + r"[ \t]+-(?=[ \t]|$)")
#: A logging library's or launcher's head that names a level (no row's or header's cell is a level's name),
#: and more than the level, which alone could be a column a table put before the rows: the level, bare or
#: bracketed, then a time (vLLM's ``INFO 03-01 12:00:01``, ``INFO 2025-03-01 12:00:01``), a ``[file.py:42]``
#: / ``file.py:42]`` source or a `` -`` / ``:`` (``INFO - ``, ``WARNING: ``); a time then the level
#: (``%(asctime)s %(levelname)s``: ``2025-03-01 12:00:01,123 INFO ``); a logger's dotted name and the
#: level between `` - `` (``%(name)s - %(levelname)s - ``: ``distributed.nanny - INFO - ``); the time and
#: level in one bracket (``[2025-03-01T12:00:01Z INFO]``, ``[INFO 12:00:01]``); loguru's ``| INFO     |
#: module:func:12 -`` after its time; glog / absl's ``I0301 12:00:01.123456 12345 file.py:42]``. A bar ``|``
#: after the level is never taken (a Markdown table's row starts with one), save loguru's, which a source
#: and `` -`` follow.
_DT = r"(?:\d{4}[-/]\d\d[-/]\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_LEVELS = r"(?:TRACE|DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL)"
#: A level, bare or bracketed (``INFO``, ``[INFO]``).
_LEVEL_TAG = r"(?:\[" + _LEVELS + r"\]|" + _LEVELS + r")"
_SOURCE = r"[\w.\-/<>]+(?::[\w.<>]+)*:\d+"
_SEP = r"[ \t]*[-:](?=[ \t]|$)"
_LOGHEAD = (_LEVEL_TAG + r"(?:[ \t]+(?:\d\d-\d\d[ \t])?" + _DT
            + r"(?:[ \t]+\[?" + _SOURCE + r"\])?(?:" + _SEP + r")?"
            r"|[ \t]+\[?" + _SOURCE + r"\](?:" + _SEP + r")?|" + _SEP + r")"
            r"|" + _DT + r"[ \t]+" + _LEVEL_TAG + r"(?:" + _SEP + r")?(?=[ \t]|$)"
            r"|[A-Za-z_][\w.]*[ \t]+-[ \t]+" + _LEVELS + r"[ \t]+-(?=[ \t]|$)"
            r"|\[(?:" + _DT + r"[ \t]+" + _LEVELS + r"|" + _LEVELS + r"[ \t]+" + _DT + r")\]"
            r"|\|[ \t]*" + _LEVELS + r"[ \t]*\|[ \t]*" + _SOURCE + r"[ \t]+-(?=[ \t]|$)"
            r"|[IWEF]\d{4}[ \t]\d\d:\d\d:\d\d\.\d+[ \t]+\d+[ \t]+" + _SOURCE + r"\]")
#: A time a timestamping filter puts before each line (moreutils ``ts``: ``%b %d %H:%M:%S`` by default, any
#: ``strftime`` format given it, as ``[%Y-%m-%d %H:%M:%S]``; ``ts -i`` / ``-s``: the time since the last line
#: or the start, ``%H:%M:%S``, fractions with ``%.S``), bracketed or not: a date and a time, or a time alone.
_WHEN = (r"(?:(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[ \t]{1,2}\d{1,2}[ \t]"
         r"|\d{4}[-/]\d\d[-/]\d\d[ T])?"
         r"\d\d:\d\d:\d\d(?:[.,]\d+)?")
_STAMP = r"\[" + _WHEN + r"\][ \t]|" + _WHEN + r"[ \t]"
#: One or more prefixes at the start of a line, and the one space that follows each.
_ONE = (_SYSLOG + "|" + _PYLOG + "|(?:" + _LOGHEAD + r")[ \t]*|" + _STAMP
        + r"|(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
        r"(?:[ \t]std(?:out|err)[ \t][PF](?=[ \t]|$)|(?=[ \t]))"
        r"|[\w.\-]*[A-Za-z][\w.\-]*(?:[-_]\d+[ \t]+|[ \t]{2,})\|(?=[ \t\x1b]|$)|\x1b\[[0-9;]*m"
        r"|\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]"
        r"|\[[^\]\s]*\](?:<std(?:out|err)>)?:?|\([^()\n]*\)|[\w.\-]+:(?=[ \t])|>(?=[ \t>]|$))[ \t]?")
#: The blanks before them are taken possessively (``*+``): no prefix starts with a blank, so giving one back
#: could never help a match, and trying every prefix again at each of a row's leading blanks is most of the
#: time the pattern takes on a line that has none.
PREFIX = re.compile(r"^[ \t]*+(?:" + _ONE + r"){1,4}")
PREFIX_BYTES = re.compile((r"^[ \t]*+(?:" + _ONE + r"){1,4}").encode(), re.M)
#: A prefix inside a line's body (:func:`inner_tags`).
_INNER = re.compile(r"\[[^\]\s]*\](?:<std(?:out|err)>)?:?|\([^()\n]*\)|(?<=\s)[\w.\-]+:(?=[ \t])")


def strip_prefix(line: str) -> str:
    """``line`` without its launcher prefixes, or ``line`` itself."""
    m = PREFIX.match(line)
    return line[m.end():] if m else line


def strip_prefixes(text: bytes) -> bytes:
    """Every line of ``text`` without its launcher prefixes."""
    return PREFIX_BYTES.sub(b"", text)


def prefix_of(line: str) -> str:
    """The launcher prefixes at the start of ``line`` (spaces removed), or ``""``."""
    m = PREFIX.match(line)
    return "".join(m[0].split()) if m else ""


def inner_tags(body: str) -> tuple[str, list[str]]:
    """``body`` (a line past its prefixes) with each launcher tag inside it replaced by a space, and
    the tags taken out, in order."""
    if "[" not in body and "(" not in body and ":" not in body:
        return body, []
    tags: list[str] = []

    def cut(m: re.Match[str]) -> str:
        tags.append(m[0])
        return " "

    return _INNER.sub(cut, body), tags
