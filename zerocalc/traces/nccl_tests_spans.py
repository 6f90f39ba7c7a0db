"""A ``# Rank`` line condensed to a span of ranks on one host, as a write-up may print a run's devices.

nccl-tests prints one line per rank (``src/common.cu``, "Using devices": ``#  Rank  0 Group  0 Pid 123 on
HOST device  0 [0000:18:00] NVIDIA H100 80GB HBM3``). A page that quotes a run may fold each host's lines
into one, keeping the ranks, the host and the device name and dropping the pid, device index and bus id:
``#  Rank  0 .. Rank  7 on h100a-gpu-0001  NVIDIA H100 80GB HBM3`` (the walkthrough of edwardsp/azcluster
at commit 968ffe7, a two-host run on Azure ND H100 v5 VMs). Such a line says as much of the hardware as
the lines it stands for, but for the bus ids: each rank of the span runs on HOST, on a GPU of that name.
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: ``Rank A .. Rank B on HOST NAME`` (``..``, ``…``, ``-`` or ``to`` between the two ranks; the second
#: ``Rank`` may be left out), the ``#`` of nccl-tests' lines kept or lost. NAME is what follows the host;
#: a line whose NAME starts with ``device`` is nccl-tests' own layout, not a span.
_SPAN = re.compile(r"^(?:#\s*)?Ranks?\s+(\d+)\s*(?:\.\.+|…|-|to)\s*(?:Rank\s+)?(\d+)\s+on\s+(\S+)"
                   r"(?:\s+(?!device\b)(\S.*?))?\s*$")


class RankSpan(NamedTuple):
    """Ranks ``first`` to ``last`` (both included) on ``host``, each on a GPU named ``gpu`` ("" if the
    line names none)."""

    first: int
    last: int
    host: str
    gpu: str

    def ranks(self) -> range:
        return range(self.first, self.last + 1)


def rank_span(payload: str) -> RankSpan | None:
    """The span a condensed ``# Rank`` line states, or ``None`` for any other line (a span whose last
    rank comes before its first is no span)."""
    m = _SPAN.match(payload)
    if not m or int(m[2]) < int(m[1]):
        return None
    return RankSpan(int(m[1]), int(m[2]), m[3], m[4] or "")
