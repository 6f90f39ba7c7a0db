"""What a sweep's own lines say against the options ``zerocalc check`` was given: ``--n``, ``--nccl-version``
and ``--topology`` stand as given (the user may price another machine or release on purpose), and a
note says where the file disagrees, so a typo or a wrong preset is not priced in silence.

- ``--n``: fewer ranks than the file's ``#  Rank`` lines list (more is an excerpt, which ``--n``
  completes), or other than its busbw / algbw ratio gives (nccl-tests ``doc/PERFORMANCE.md``:
  busbw = algbw × 2(n−1)/n for all_reduce, (n−1)/n for all_gather, reduce_scatter and alltoall);
- ``--nccl-version``: another release than the one the file states (nccl-tests' ``nccl-library=`` or
  NCCL's ``NCCL version`` line);
- ``--topology``: a GPU other than the one its device lines name (the preset those lines describe), or
  more ranks on one host than the topology's node holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from zerocalc.errors import TraceFormatError, ZerocalcError


def ranks_note(path: str, run: Mapping, rows: Sequence[Mapping], op: str, n: int) -> str | None:
    """Where ``--n`` = ``n`` disagrees with the file's rank lines or its bandwidth columns, or ``None``."""
    from zerocalc.traces.busbw import ranks_from_bandwidth

    parts = []
    listed = run.get("ranks_listed")
    if listed and listed > n:
        parts.append(f"its # Rank lines list {listed} ranks")
    try:
        got = ranks_from_bandwidth(rows, op, file=path)
    except TraceFormatError:  # the bandwidths cannot tell (factor 1, too small)
        got = None
    if got is not None and got.n != n:
        parts.append(f"its busbw/algbw gives {got.n} ({got.how})")
    if not parts:
        return None
    return f"--n {n} disagrees with {path}: {' and '.join(parts)}; priced on {n} ranks as given"


def version_note(path: str, given: str, stated: str | None, lib: str = "NCCL") -> str | None:
    """Where ``--nccl-version`` = ``given`` is not the release the file states, or ``None`` (``2.26``
    given for a file of ``2.26.2`` agrees)."""
    if not stated:
        return None
    g = str(given).strip().lstrip("v").split("-")[0].split("+")[0]
    s = str(stated).strip().lstrip("v").split("-")[0].split("+")[0]
    if s == g or s.startswith(g + "."):
        return None
    return f"{path} states {lib} {s}; priced as {lib} {g}, as --nccl-version asks"


def topology_note(given, run: Mapping, described: Callable[[], object],
                  chosen: str | None = None) -> str | None:
    """Where a given topology does not fit the file: the GPU its device lines name is another preset's
    (``described()``: the topology those lines choose, a :class:`ZerocalcError` where they choose none), or a
    host runs more ranks than its node holds; ``None`` otherwise. ``chosen``: how the topology was chosen
    where no ``--topology`` gave it (``fit --out`` prices every sweep on the first sweep's preset)."""
    parts = []
    gpus = sorted(run.get("gpus") or {})
    try:
        auto = described() if gpus else None
    except ZerocalcError:  # no preset describes the file's GPU (or its lines): nothing to compare with
        auto = None
    if auto is not None and auto.gpu and given.gpu and auto.gpu != given.gpu:
        parts.append(f"its device lines name {', '.join(gpus)}, {auto.name}'s {auto.gpu}, not {given.name}'s "
                     f"{given.gpu}")
    hosts = run.get("hosts") or {}
    most = max(hosts.values(), default=0)
    if most > given.gpus_per_node:
        parts.append(f"they list {most} ranks on one host, more than the {given.gpus_per_node} GPUs of a "
                     f"{given.name} node")
    if not parts:
        return None
    if chosen is not None:
        return (f"{given.name}, {chosen}, does not fit the file: {'; '.join(parts)}; priced on it "
                "(--topology to choose)")
    return f"--topology {given.name} does not fit the file: {'; '.join(parts)}; priced on it as given"
