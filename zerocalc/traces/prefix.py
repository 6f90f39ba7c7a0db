"""Launcher prefixes in front of a log line, and how to look past them.

Launchers tag each line of a process's output: OpenMPI ``--tag-output`` ``[1,0]<stdout>:``,
``mpirun``/``torchrun`` ``[0]`` or ``[0]:``, ``srun -l`` ``0:``, ``pdsh`` ``host:``, Ray
``(pid=123, ip=10.0.0.1)``; they may be stacked. A bracket with a space inside is not one (a
shell prompt ``[user@host dir]$``, DeepSpeed's ``[2022-06-26 01:39:55,722]``), nor a bare
number (a table's first column). The NCCL log parser searches past any prefix instead.
"""

from __future__ import annotations

import re

#: One or more prefixes at the start of a line, and the one space that follows each.
_ONE = r"(?:\[[^\]\s]*\](?:<std(?:out|err)>)?:?|\([^()\n]*\)|[\w.\-]+:(?=[ \t]))[ \t]?"
PREFIX = re.compile(r"^[ \t]*(?:" + _ONE + r"){1,4}")
PREFIX_BYTES = re.compile((r"^[ \t]*(?:" + _ONE + r"){1,4}").encode(), re.M)


def strip_prefix(line: str) -> str:
    """``line`` without its launcher prefixes, or ``line`` itself."""
    m = PREFIX.match(line)
    return line[m.end():] if m else line


def strip_prefixes(text: bytes) -> bytes:
    """Every line of ``text`` without its launcher prefixes."""
    return PREFIX_BYTES.sub(b"", text)
