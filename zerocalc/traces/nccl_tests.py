"""nccl-tests ``*_perf`` text output (every column layout) → one row per size; the ``-J`` JSON report
is read into the same rows and runs by :mod:`zerocalc.traces.nccl_tests_json`.

nccl-tests ``src/common.cu``/``src/util.cu`` and ``doc/PERFORMANCE.md``: ``size`` is the total
bytes, ``count`` the NCCL count argument (per-rank send count for all_gather); then out-of-place
and in-place ``time(us) algbw busbw #wrong``. Each layout is read BY ITS HEADER (the
``#  size  count  type ...`` line above the rows): before Aug 2022 (nccl-tests 51af557) there
was no common ``redop root`` pair but per-test lead columns (all_reduce, reduce_scatter and
alltoall ``redop``; broadcast ``root``; reduce ``redop root``; all_gather and sendrecv neither)
and an ``error`` column instead of ``#wrong``; ``-C`` labels the times ``cputime``, ``-S``
appends a ``timestamp`` and per-iteration timing (2.19) adds ``i_min i_max i_p99 i_cv%`` to
each side. A row that does not fit the header above it is refused (never read with shifted
columns); rows without any header (an excerpt) are read by their shape. ``N/A`` cells (no
data check, alltoall in-place) are missing values. rccl-tests ``-O 0`` prints the in-place group
alone: its time is then the row's duration. nccl-tests v1 (to Mar 2019) headed its table ``bytes N
type`` and printed times in milliseconds (:mod:`zerocalc.traces.nccl_tests_rows`).

Lines may carry a launcher's prefix (OpenMPI ``--tag-output`` ``[1,0]<stdout>:``, ``[0]``, ``srun -l`` ``0:``,
Ray ``(pid=…)``), removed by :func:`zerocalc.traces.prefix.strip_prefix` as the NCCL log parser searches past
them. A file may hold several runs: each ``# nccl-tests version``, ``# Collective test starting`` or ``#
nThread`` line that does not belong to the current run's preamble starts a new one, with its own ranks (``#
Rank`` lines; where a line of dots follows them, a post's cut, or their count lies outside what busbw/algbw
allows, the rows must tell), op (``<op>_perf`` on the command line or in ``Collective test starting``; failing
that, the file name) and NCCL version (``nccl-library=`` since nccl-tests 2.17 (Oct 2025), or NCCL's own
``NCCL version x.y.z`` line). A row no larger than the last of its series (type, reduction, root) starts a run
again (``-N`` cycles, or another process's run: nccl-tests built without MPI prints one run per process, their
lines interleaved); each later row goes to the run under the same header whose series it carries on most
closely (:meth:`_Runs.row`). Every row carries its ``run`` (0, 1, …) and ``nccl_version``; ``meta["runs"]``
lists each run's op, group size, versions and what could not be told (``missing``: ``op``, ``ranks``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, TextIO

from zerocalc.traces.busbw import listed_ranks_cut
from zerocalc.traces.launch_env import settings_in
from zerocalc.traces.nccl_info import NETWORK_EVIDENCE, InfoFacts
from zerocalc.traces.nccl_tests_markdown import Tables
from zerocalc.traces.nccl_tests_op import inplace_checked, op_from_table, table_contradicts
from zerocalc.traces.nccl_tests_rows import Layout, RowJoiner, dated_by_root, parse_header
from zerocalc.traces.nccl_tests_rows import cputime_refusal as cputime_refusal  # its home before the split
from zerocalc.traces.nccl_tests_rows import parse_row as parse_row  # its public home before the split
from zerocalc.traces.nccl_tests_series import carried_on
from zerocalc.traces.nccl_tests_spans import rank_span
from zerocalc.traces.nccl_tests_wrapped import DEVICE as _DEVICE
from zerocalc.traces.nccl_tests_wrapped import ELISION as _ELISION
from zerocalc.traces.nccl_tests_wrapped import Wrapped, options_from
from zerocalc.traces.prefix import WIDE_SPACES, strip_prefix
from zerocalc.traces.records import ParseResult
from zerocalc.traces.schema import DTYPE_BYTES, NCCL_TESTS_DTYPES, NCCL_TESTS_OPS

FORMAT = "nccl_tests"
#: ``<test>_perf`` (``_perf_mpi`` when built with ``NAME_SUFFIX=_mpi``) as a word of a command line or of a
#: file name: an underscore may join it to the rest of a name (``nccl_alltoall_perf_2nodes.log``), a letter
#: or digit may not (nccl-tests ``src/Makefile``: ``BIN_FILES = $(BIN_FILES_LIST:%=%_perf$(NAME_SUFFIX))``).
_PERF = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(sorted(NCCL_TESTS_OPS, key=len, reverse=True))
                   + r")_perf(?:_mpi)?(?![A-Za-z0-9])")
#: Google Cloud's gIB image runs nccl-tests as ``run_nccl_tests.sh -t all_gather -b 1K -e 8G HOST…`` (GCP's
#: "Run NCCL on GKE"; kubernetes-sigs/dranet ``site/content/docs/user/gke-rdma.md``): ``-t`` names the test,
#: and its output names no ``<test>_perf`` unless its nccl-tests prints ``# Collective test starting``.
_GIB_RUN = re.compile(r"run_nccl_tests\.sh\b.*?\s-t\s+("
                      + "|".join(sorted(NCCL_TESTS_OPS, key=len, reverse=True)) + r")(?![A-Za-z0-9_])")
#: A ``# Rank`` line: ``Rank R Group G Pid P on HOST`` (2.13+), ``Rank R Pid P on HOST`` (2.0+), ``Rank R on
#: HOST`` (v1, to Mar 2019: ``printf("#   Rank %2d on %10s device %2d [0x%02x] %s\n", ...)``).
#: Its ``#`` is lost where a post's ``#`` lines became Markdown headings (NVIDIA/nccl issue 583: ``Rank  0
#: Pid 1821213 on AI-A100-Beethoven01 device  0 [0x00] …``): such a line counts with its ``on … device``.
#: A line whose host a post left out (``#  Rank  0 Group  0 Pid 221599 device  0 [0000:8f:00] NVIDIA B200``,
#: or ``on`` and blanks where the name was) still counts its rank and names its GPU, not its host.
_RANK = re.compile(r"^(?:#\s+)?Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+(\d+)\s+)?(?=on\s|device\s)")
#: A PCI bus id as nccl-tests prints it since 2.10 (``0000:04:00``; before, ``0x10``, not unique per GPU).
_BUS_ID = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}$")
#: The bus of a ``# Rank`` line's id: ``[0x1a]`` (before 2.10, the bus alone) or ``[0000:1a:00]``.
_BUS_NUMBER = re.compile(r"^(?:0x([0-9a-fA-F]{1,2})|[0-9a-fA-F]{4,8}:([0-9a-fA-F]{2}):[0-9a-fA-F]{2})$")
#: Tests whose ``size`` is ``count`` × element × ranks (``GetCollByteCount`` of each, module
#: :data:`~zerocalc.traces.schema.NCCL_TESTS_OPS`): the file tells the ranks where the size divides.
_SIZE_IS_P_COUNTS = ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter", "hypercube")
#: Markers that open a run's preamble (nccl-tests src/util.cu writeDeviceReport, common.cu).
_MARKERS = (("version", re.compile(r"^#\s*nccl-tests version\b")),
            ("starting", re.compile(r"^#\s*Collective test starting\b")),
            ("nthread", re.compile(r"^#?\s*nThread\s+\d+\s+nGpus\b")))
#: ``nccl-library=L`` (nccl-tests) or ``rccl-library=L`` (rccl-tests 2.17.9 and later prints
#: ``# rccl-tests version X rccl-headers=H rccl-library=L``, L: RCCL's ``NCCL_VERSION_CODE``, 22707 = 2.27.7).
_LIBRARY = re.compile(r"\b[nr]ccl-library=(\d+)")
#: A terminal's control sequences (ECMA-48 CSI, ``ESC[`` parameters and a letter): colours and styles
#: (SGR, ``ESC[32m`` … ``ESC[0m``) and GNU grep's erase-to-end-of-line after each (``ESC[K``) that a
#: wrapper puts around whole lines or inside them (a launcher's per-rank colours, ``grep --color=always``,
#: a CI log kept with its codes); none is part of what nccl-tests printed.
TERMINAL_CODES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: :data:`zerocalc.traces.prefix.WIDE_SPACES`, each read as a space, as :mod:`zerocalc.traces.detect`
#: reads them.
_WIDE_SPACES = str.maketrans(dict.fromkeys(WIDE_SPACES, " "))
#: ``-g``: the GPUs each thread drives (nccl-tests src/common.cu prints ``nThread T nGpus G``).
_NGPUS = re.compile(r"\bnGpus\s+(\d+)")
#: nccl-tests ``-R`` / ``--local_register`` after the test's name on its command line (``-R 2``, ``-R2``,
#: ``--local_register 2``, ``--local_register=2``; ``src/common.cu``): 1 registers the buffers locally, 2
#: symmetrically (``ncclCommWindowRegister``, NCCL 2.27 on).
_REGISTER = re.compile(r"(?<!\S)(?:-R\s*|--local_register(?:=|\s+))(\d+)(?!\S)")
#: What nccl-tests prints when ``-R 2`` meets an NCCL before 2.27: it registers locally instead.
_REGISTER_LOCAL = "Option -R 2 (symmetric) is not supported before NCCL 2.27"
_TESTS_VERSION = re.compile(r"(?:[nr]ccl-tests version|^rccl-tests: Version) (\S+)")
#: RCCL's own banner (``showVersion``, RCCL ``src/init.cc``, printed by newer rccl-tests before the table and
#: under ``NCCL_DEBUG=VERSION``): ``RCCL version : 2.22.3-HEAD:7d8d67c``; RCCL's version is the NCCL API
#: release it tracks. Older RCCL INFO lines print ``RCCL version 2.18.3+hip6.0 …``.
_RCCL_VERSION = re.compile(r"\bRCCL version\s*:?\s*(\d+\.\d+\.\d+)")
_NCCL_VERSION = re.compile(r"\bNCCL version (\d+\.\d+\.\d+)")


def nccl_version_from_code(code: int) -> str:
    """``NCCL_VERSION_CODE`` → ``x.y.z``: major×10000 + minor×100 + patch since 2.9, major×1000 +
    minor×100 + patch before (NCCL ``src/nccl.h.in``, ``NCCL_VERSION(X,Y,Z)``)."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _to_row(rec: dict[str, Any], op_key: str | None, p: int | None, file: str, lineno: int) -> dict[str, Any]:
    dtype = NCCL_TESTS_DTYPES.get(rec["type"], rec["type"])
    eb = DTYPE_BYTES.get(dtype)
    count = rec["count"]
    spec = NCCL_TESTS_OPS.get(op_key) if op_key else None
    op = spec[0] if spec else "other"
    if spec and op_key in _SIZE_IS_P_COUNTS and eb and count:
        q, r = divmod(rec["size_bytes"], count * eb)
        if r == 0 and (p is None or p == q):
            p = q

    def scale(f: str) -> int | None:
        if f == "?":
            return None
        return count if f == "1" else (count * p if p is not None else None)

    side = "oop_" if "oop_time_us" in rec or "ip_time_us" not in rec else "ip_"  # ip_: in-place alone
    t = rec.get(side + "time_us")
    return {
        "file": file, "rank": None, "step": None, "op": op, "dtype": dtype, "elem_bytes": eb,
        "in_nelems": scale(spec[1]) if spec else None, "out_nelems": scale(spec[2]) if spec else None,
        "group_size": p, "group": None, "start_s": None,
        "duration_s": t * 1e-6 if t is not None else None, "source_line": lineno,
        "count": count, "size_bytes": rec["size_bytes"], "redop": rec.get("redop"), "root": rec.get("root"),
        "algbw_GBps": rec.get(side + "algbw"), "busbw_GBps": rec.get(side + "busbw"),
        "inplace_duration_s": rec["ip_time_us"] * 1e-6 if rec.get("ip_time_us") is not None else None,
        "inplace_algbw_GBps": rec.get("ip_algbw"), "inplace_busbw_GBps": rec.get("ip_busbw"),
        "wrong": rec.get(side + "wrong"), "layout": rec["layout"], "nccl_test": op_key if spec else None,
    }


@dataclass
class _Run:
    """One run's preamble facts and rows, in file order."""

    #: The line it starts at (``None``: a JSON report's one run).
    line: int | None
    op_key: str | None = None
    ranks: set[int] = field(default_factory=set)
    #: Whether a line of dots right after a ``# Rank`` line cut them (a post's excerpt): not all its ranks.
    elided: bool = False
    #: rank → (host, device name, bus id) from its ``# Rank`` line, where the line names them (host
    #: ``None`` where the line leaves it out).
    devices: dict[int, tuple[str | None, str, str]] = field(default_factory=dict)
    #: rank → the process ids its ``# Rank`` lines print (several for a rank only where processes that
    #: never joined one communicator each numbered itself: :func:`_devices`' ``rank0_processes``).
    pids: dict[int, set[str]] = field(default_factory=dict)
    #: network kind → (line, the line's text) of the first line that names it (:data:`NETWORK_EVIDENCE`).
    network: dict[str, tuple[int, str]] = field(default_factory=dict)
    #: NCCL variable → (value, line, strength) the run's lines set (:mod:`zerocalc.traces.launch_env`).
    env: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    #: nccl-tests' ``-g``: GPUs per thread, from the ``nThread … nGpus G`` line.
    gpus_per_thread: int | None = None
    #: nccl-tests' ``-a`` (calls aggregated into one group) and ``-G`` (iterations captured in CUDA graphs)
    #: from the same line, ``None`` when it does not print them.
    agg_iters: int | None = None
    graph: int | None = None
    #: nccl-tests' ``-R`` from its command line (:data:`_REGISTER`), ``None`` when no line gives it.
    local_register: int | None = None
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    markers: set[str] = field(default_factory=set)
    layout: Layout | None = None
    recs: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    #: What the run's NCCL INFO lines state (:mod:`zerocalc.traces.nccl_info`).
    info: InfoFacts = field(default_factory=InfoFacts)


@dataclass
class _Runs:
    """The runs of an output as its lines are read: where each starts, and what it learns."""

    runs: list[_Run] = field(default_factory=list)
    #: An ``<op>_perf`` command line seen before its run's preamble.
    pending_op: str | None = None
    #: The ``-R`` of that command line.
    pending_register: int | None = None
    #: NCCL variables set by lines after a run's rows, before the next run's preamble.
    pending_env: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    #: The runs the rows that follow may belong to (:meth:`row`): the current one, the one a second
    #: header broke into, and those its rows started again.
    family: list[_Run] = field(default_factory=list)

    def last(self) -> _Run | None:
        return self.runs[-1] if self.runs else None

    def current(self, lineno: int) -> _Run:
        """The run a line belongs to (the first one, opened at ``lineno``, if none is)."""
        if not self.runs:
            self.runs.append(_Run(lineno, op_key=self.pending_op, env=self.pending_env,
                                  local_register=self.pending_register))
            self.pending_env = {}
        return self.runs[-1]

    def marker(self, kind: str, lineno: int) -> None:
        """A preamble marker: a new run unless the current one's preamble is still open and lacks it."""
        run = self.last()
        self.family = []
        if run is None or run.recs or kind in run.markers or run.layout is not None:
            run = _Run(lineno, op_key=self.pending_op, env=self.pending_env,
                       local_register=self.pending_register)
            self.runs.append(run)
            self.pending_op, self.pending_env, self.pending_register = None, {}, None
        run.markers.add(kind)

    def command(self, test: str, kind: str | None, lineno: int, register: int | None = None) -> None:
        """An ``<op>_perf`` name (and the ``-R`` its line gives): the current run's op if its preamble names
        none yet, else the next run's."""
        run = self.last()
        if kind == "starting" or (run is not None and not run.recs and run.op_key is None):
            self.current(lineno).op_key = test
            if register is not None:
                self.current(lineno).local_register = register
        else:
            self.pending_op, self.pending_register = test, register

    def registered_locally(self, lineno: int) -> None:
        """nccl-tests' line that ``-R 2`` fell back to local registration: the run about to start's."""
        run = self.last()
        if run is not None and run.recs:
            self.pending_register = 1
        else:
            self.current(lineno).local_register = 1

    def versions(self, payload: str, lineno: int) -> None:
        """The NCCL version (``nccl-library=`` or ``rccl-library=`` code, else NCCL's own line or RCCL's
        banner) and the nccl-tests (or rccl-tests) version."""
        m = _LIBRARY.search(payload)
        v = nccl_version_from_code(int(m[1])) if m else None
        m2 = _NCCL_VERSION.search(payload) or _RCCL_VERSION.search(payload)
        v = v or (m2[1] if m2 else None)
        if v is not None:
            self.current(lineno).nccl_version = self.current(lineno).nccl_version or v
        m3 = _TESTS_VERSION.search(payload)
        if m3:
            self.current(lineno).nccl_tests_version = m3[1]

    def header(self, layout: Layout, lineno: int) -> None:
        """A table header: the current run's layout, or a new run's after rows (whose rows may yet
        continue the run before it: :meth:`row`)."""
        run = self.current(lineno)
        self.family = [run]
        if run.recs:  # a second table without a preamble: a new run of the same test
            run = self._again(run, lineno)
        run.layout = layout

    def _again(self, run: _Run, lineno: int) -> _Run:
        """A new run of the same test as ``run``, at ``lineno``: its facts copied, no rows yet."""
        new = _Run(lineno, op_key=run.op_key, ranks=set(run.ranks), devices=dict(run.devices),
                   pids={r: set(v) for r, v in run.pids.items()}, network=dict(run.network),
                   env=dict(run.env), info=run.info,
                   gpus_per_thread=run.gpus_per_thread, agg_iters=run.agg_iters, graph=run.graph,
                   local_register=run.local_register, nccl_version=run.nccl_version,
                   nccl_tests_version=run.nccl_tests_version,
                   layout=run.layout)
        self.runs.append(new)
        self.family.append(new)
        return new

    def row(self, got: tuple[int, dict[str, Any]], lineno: int) -> None:
        """A result row, into the run of :attr:`family` it carries on, else a run started again
        (:func:`zerocalc.traces.nccl_tests_series.carried_on`)."""
        run = self.current(lineno)
        if run not in self.family:
            self.family = [run]
        rec = got[1]
        if not rec["size_bytes"]:  # a size its type rounds to nothing (-b 1 of float), printed once per size
            run.recs.append(got)
            return
        i = carried_on([(r.recs, r.layout) for r in self.family], rec, run.layout)
        run = self.family[i] if i is not None else self._again(run, lineno)
        run.recs.append(got)


def parse(stream: TextIO, file: str, *, strict: bool = False) -> ParseResult:
    """Stream a text ``*_perf`` output: one or several runs, each read by its own header."""
    res = ParseResult(meta={"format": FORMAT})
    runs = _read_runs(stream, file, strict, res)
    _tabulate(runs, file, res)
    return res


def _read_runs(stream: TextIO, file: str, strict: bool, res: ParseResult) -> list[_Run]:
    """The runs of the output, line by line: preamble lines, headers, ``# Rank`` lines and rows, each
    put together from its pieces (:class:`~zerocalc.traces.nccl_tests_rows.RowJoiner`; a row that does
    not fit goes to ``res``'s skip log, or raises in strict mode)."""
    state = _Runs()
    rows, after_rank = RowJoiner(file, strict, res.skipped), False
    wrapped, tables = Wrapped(), Tables()
    for lineno, line in enumerate(stream, 1):
        if "\x1b" in line:  # a terminal's codes around or inside the line (TERMINAL_CODES)
            line = TERMINAL_CODES.sub("", line)
        if not line.isascii():  # a web page's blanks (an ASCII line, nearly every one, holds none)
            line = line.translate(_WIDE_SPACES)
        payload = strip_prefix(line).strip()
        if line.lstrip().startswith("rccl-tests: Version"):  # rccl-tests' own line, not a launcher's prefix
            payload = line.strip()
        if not payload:
            tables.end()
            continue
        if (("|" in payload or tables.table is not None)
                and tables.take(payload, lineno, file, state, rows, strict, res.skipped)):
            continue
        if wrapped.rest_of_line(state, line, payload, lineno):
            continue
        if _ELISION.match(payload) and after_rank and state.runs:  # coreweave/nccl-tests README, 2022-23
            state.runs[-1].elided = True
        after_rank = bool(_RANK.match(payload))
        kind = next((k for k, rx in _MARKERS if rx.match(payload)), None)
        if kind is not None:
            rows.flush()
            state.marker(kind, lineno)
            g = _NGPUS.search(payload) if kind == "nthread" else None
            if g:
                run = state.current(lineno)
                run.gpus_per_thread = int(g[1])
                options_from(run, payload)
                wrapped.options = run
        m = _PERF.search(payload) if "_perf" in payload else None
        m = m or (_GIB_RUN.search(payload) if "run_nccl_tests" in payload else None)
        if m:
            r = _REGISTER.search(payload, m.end())
            state.command(m[1], kind, lineno, int(r[1]) if r else None)
        if _REGISTER_LOCAL in payload:
            state.registered_locally(lineno)
        if ("NCCL version" in payload or "ccl-library=" in payload or "RCCL version" in payload
                or "ccl-tests version" in payload or payload.startswith("rccl-tests: Version")):
            state.versions(payload, lineno)
        header = parse_header(payload, lineno) if "size" in payload or "bytes" in payload else None
        wrapped.header = (payload, header) if header is not None else None
        if header is not None:
            rows.flush()
            state.header(header, lineno)
            continue
        if "NCCL_" in payload:
            _env(state, payload, lineno)
        if payload.startswith(("#", "Rank ")) and _rank_line(state, payload, lineno, wrapped):
            continue
        if "NCCL" in payload:
            _network(state, payload, lineno)
            if "NCCL INFO" in payload:
                state.current(lineno).info.add(payload, lineno)
        run = state.last()
        got = rows.feed(line, lineno, run.layout if run else None)
        if got is not None:
            state.row(got, lineno)
    rows.flush()
    return state.runs


def _rank_line(state: _Runs, payload: str, lineno: int, wrapped: Wrapped) -> bool:
    """Whether a line led by ``#`` or ``Rank`` is done with: a ``# Rank`` line (its rank, process, host,
    GPU and bus id kept on its run; ``wrapped`` told of it, its GPU's name maybe on the next line), a
    condensed one (:func:`~zerocalc.traces.nccl_tests_spans.rank_span`), or another ``#`` line."""
    m = _RANK.match(payload)
    d = _DEVICE.match(payload, m.end()) if m else None
    if m and (d or payload.startswith("#")):
        run = state.current(lineno)
        run.ranks.add(int(m[1]))
        if m[2]:
            run.pids.setdefault(int(m[1]), set()).add(m[2])
        if d:
            run.devices[int(m[1])] = (d[1], " ".join((d[3] or "").split()), d[2])  # a paste's tabs: blanks
            wrapped.device = (run, int(m[1]))
        else:  # its ``device D [BUS] NAME`` may be on the next line
            wrapped.broken = (run, int(m[1]), payload[m.end():])
    span = None if m else rank_span(payload)
    for r in span.ranks() if span else ():
        state.current(lineno).ranks.add(r)
        state.current(lineno).devices[r] = (span.host, span.gpu, "")
    return bool(d or span or payload.startswith("#"))


def _network(state: _Runs, payload: str, lineno: int) -> None:
    """The network an INFO or launch line names, kept on the run it belongs to (the first line per kind)."""
    for kind, rx in NETWORK_EVIDENCE:
        if rx.search(payload):
            state.current(lineno).network.setdefault(kind, (lineno, payload.strip()[:200]))
            return


def _env(state: _Runs, payload: str, lineno: int) -> None:
    """The NCCL variables a line sets, kept on its run (a line after a run's rows: the next run's);
    a stronger way of saying wins, else the later line (:mod:`zerocalc.traces.launch_env`)."""
    found = settings_in(payload)
    if not found:
        return
    run = state.last()
    env = state.pending_env if run is not None and run.recs else state.current(lineno).env
    for name, value, strength in found:
        old = env.get(name)
        if old is None or strength >= old[2]:
            env[name] = (value, lineno, strength)


def _tabulate(runs: list[_Run], file: str, res: ParseResult) -> None:
    """The rows of the runs that have any into ``res``, each run's facts in ``meta["runs"]``, and
    the world size, test and NCCL version where every run agrees."""
    name_op = _PERF.search(os.path.basename(file))
    res.meta.update(rank=None, backend="nccl", runs=[])
    sizes: set[int | None] = set()
    for i, run in enumerate(r for r in runs if r.recs):
        named = name_op[1] if name_op else None
        rows, meta = _run_rows(i, run, run.op_key or named, file, named)
        res.rows.extend(rows)
        res.meta["runs"].append(meta)
        sizes.add(meta["group_size"])
    runs_meta = res.meta["runs"]
    tests = {r["test"] for r in runs_meta}
    versions = {r["nccl_version"] for r in runs_meta}
    res.meta.update(world_size=sizes.pop() if len(sizes) == 1 else None,
                    test=tests.pop() if len(tests) == 1 else None,
                    nccl_version=versions.pop() if len(versions) == 1 else None)


def _run_rows(i: int, run: _Run, op_key: str | None, file: str, name_op: str | None = None
              ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run ``i``'s rows (op: ``op_key``, else its table's columns, :mod:`~zerocalc.traces.nccl_tests_op`;
    group size: its ``# Rank`` lines, else its INFO lines' ``nRanks``; none where the lines name a rank past
    their count, or a count its busbw/algbw denies: an excerpt) and its ``meta["runs"]`` entry (``op_how``:
    how its columns told the op, or why not; ``None`` when the file names it and they fit: a test the file's
    own lines name but the columns deny (:func:`~zerocalc.traces.nccl_tests_op.table_contradicts`) gives
    way to the file name's, which the user chose, else to theirs)."""
    run.recs = dated_by_root(run.recs)
    p = len(run.ranks) if run.ranks else run.info.ranks()
    if run.ranks and (run.elided or max(run.ranks) >= len(run.ranks)):
        p = None  # an excerpt (``#  Rank 71`` alone, or lines cut by ``...``): more ranks ran than listed
    first, op_how = op_key, None
    rows = [_to_row(rec, op_key, p, file, ln) for ln, rec in run.recs]
    checked = inplace_checked(run.recs)
    clash = table_contradicts(rows, run.op_key, checked) if run.op_key is not None else None
    if clash is not None:  # the file's own command line names one test above another's table
        named, op_key = op_key, name_op
    if op_key is None:  # no <test>_perf in the file or its name: the table's own columns may tell
        op_key, op_how = op_from_table(rows, p, file, checked)
    if clash is not None:
        told = (f"read as {op_key}_perf's: {op_how.split(', ', 3)[-1]}" if op_key and op_how
                else f"read as {op_key}_perf's, as the file's name says" if op_key
                else op_how.split(": ", 1)[-1])
        op_how = f"the file names {named}_perf, but {clash}: {told}"
    if op_key != first:
        rows = [_to_row(rec, op_key, p, file, ln) for ln, rec in run.recs]
    if p and op_key and listed_ranks_cut(rows, NCCL_TESTS_OPS[op_key][0], p):  # cut short, unmarked
        p, rows = None, [_to_row(rec, op_key, None, file, ln) for ln, rec in run.recs]
    gs = {r["group_size"] for r in rows if r["size_bytes"]} or {r["group_size"] for r in rows}
    group = gs.pop() if len(gs) == 1 else None
    for r in rows:  # a zero-size row (size / count tells no ranks) takes the group its sized rows tell
        r["run"], r["nccl_version"] = i, run.nccl_version
        r["group_size"] = r["group_size"] if r["size_bytes"] or group is None else group
    missing = [k for k, v in (("op", op_key), ("ranks", group)) if v is None]
    return rows, {
        "run": i, "line": run.line, "op": NCCL_TESTS_OPS[op_key][0] if op_key else None,
        "test": f"{op_key}_perf" if op_key else None, "group_size": group,
        "nccl_version": run.nccl_version, "nccl_tests_version": run.nccl_tests_version,
        "layout": rows[0]["layout"], "rows": len(rows), "missing": missing, "op_how": op_how,
        **_devices(run)}


def _devices(run: _Run) -> dict[str, Any]:
    """What a run's lines say of its hardware: ``gpus`` (device name → ranks), ``hosts`` (host name →
    ranks, in order of first rank), both empty when no ``# Rank`` line names them (``gpus`` also when the
    lines leave the device name empty); ``ranks_listed``
    (how many ``# Rank`` lines) and ``last_rank`` (the highest rank they name); ``rank0_processes``: the
    processes whose ``# Rank 0`` lines the run prints (more than one where each process ran a test of its
    own: nccl-tests built without MPI and started N times by ``mpirun`` / ``srun`` prints N copies of a
    one-rank run, each its own rank 0; nccl-tests' README: "NCCL tests rely on MPI to work on multiple
    processes ... set MPI=1"); ``shared_devices``
    (``[host, bus id, [ranks]]`` for each GPU two or more ranks ran on, told by the full bus ids
    nccl-tests prints since 2.10); ``bus_ids`` (host → the full bus ids of its ranks' GPUs, lower case, in
    rank order; a host whose lines print none is left out); ``root_bus_hosts`` (hosts of two or more GPUs
    whose every GPU the lines put on PCI bus 0: ``[0x00]``, or ``[0001:00:00]``, ``[0002:00:00]``, each on
    a PCI domain of its own, as a hypervisor presents them,
    :func:`zerocalc.topology.stated.on_own_host_bridges`); ``pci_buses`` (host → the PCI bus number of each
    of its ranks' GPUs, rank order, for hosts whose every line prints one,
    :mod:`zerocalc.topology.pci_buses`); ``network`` (kind → ``[line, text]``,
    :data:`NETWORK_EVIDENCE`);
    ``nccl_env`` (NCCL variable → ``[value, line]`` the run's lines set, :mod:`zerocalc.traces.launch_env`);
    ``gpus_per_thread`` (``-g``), ``agg_iters``
    (``-a``) and ``graph`` (``-G``), each ``None`` when the file does not print it; ``local_register``
    (``-R`` from the command line, ``None`` when no line gives it); ``nccl_info`` (what
    its NCCL INFO lines state, :meth:`zerocalc.traces.nccl_info.InfoFacts.as_dict`)."""
    gpus: dict[str, int] = {}
    hosts: dict[str, int] = {}
    on_bus: dict[tuple[str, str], list[int]] = {}
    bus_ids: dict[str, list[str]] = {}
    buses: dict[str, list[int | None]] = {}
    for rank in sorted(run.devices):
        host, gpu, bus = run.devices[rank]
        if gpu:  # an unnamed GPU (rccl-tests without a marketing name) counts its host, not a model
            gpus[gpu] = gpus.get(gpu, 0) + 1
        if host is None:  # a line without its host names the GPU alone
            continue
        hosts[host] = hosts.get(host, 0) + 1
        if _BUS_ID.match(bus):
            on_bus.setdefault((host, bus.lower()), []).append(rank)
            bus_ids.setdefault(host, []).append(bus.lower())
        m = _BUS_NUMBER.match(bus.strip())
        buses.setdefault(host, []).append(int(m[1] or m[2], 16) if m else None)
    shared = [[h, b, ranks] for (h, b), ranks in on_bus.items() if len(ranks) > 1]
    root_bus = [h for h, b in buses.items() if len(b) > 1 and all(x == 0 for x in b)]
    return {"gpus": gpus, "hosts": hosts, "ranks_listed": len(run.ranks),
            "last_rank": max(run.ranks) if run.ranks else None,
            "rank0_processes": len(run.pids.get(0, ())), "shared_devices": shared, "bus_ids": bus_ids,
            "root_bus_hosts": root_bus,
            "pci_buses": {h: b for h, b in buses.items() if all(x is not None for x in b)},
            "network": {k: [ln, text] for k, (ln, text) in run.network.items()},
            "nccl_env": {k: [v, ln] for k, (v, ln, _) in sorted(run.env.items())},
            "gpus_per_thread": run.gpus_per_thread, "agg_iters": run.agg_iters, "graph": run.graph,
            "local_register": run.local_register, "nccl_info": run.info.as_dict()}


def complete(table: Any, *, op: str | None = None, ranks: int | None = None) -> Any:
    """A copy of ``table`` whose nccl-tests rows that name no op or no group size take them from
    the user's options (``--op``, ``--ranks``), with their element counts recomputed from
    ``count`` as :func:`parse` computes them. Rows that name them keep what they say."""
    import pandas as pd

    if table.empty or "layout" not in table.columns or (op is None and ranks is None):
        return table
    key = None
    if op is not None:
        key = next((k for k, v in NCCL_TESTS_OPS.items() if op.lower() in (k, v[0])), None)
        if key is None:
            from zerocalc.errors import UnknownNameError

            raise UnknownNameError("nccl-tests op", op, sorted(NCCL_TESTS_OPS))
    key_of = {v[0]: k for k, v in NCCL_TESTS_OPS.items()}
    type_of = {c: n for n, c in reversed(NCCL_TESTS_DTYPES.items())}
    t = table.copy()
    todo = t["layout"].notna() & ((t["op"] == "other") | t["group_size"].isna())
    categorical = isinstance(t["op"].dtype, pd.CategoricalDtype)
    if categorical:  # the rows below may take an op that is not among its categories
        t["op"] = t["op"].astype("string")
    for idx in t.index[todo.fillna(False).to_numpy()]:
        r = t.loc[idx]
        test = r.get("nccl_test")
        k = test if isinstance(test, str) else key if r["op"] == "other" else key_of.get(r["op"])
        p = ranks if pd.isna(r["group_size"]) else int(r["group_size"])
        rec = {"type": type_of.get(r["dtype"], r["dtype"]), "count": int(r["count"]),
               "size_bytes": int(r["size_bytes"]), "layout": r["layout"]}
        new = _to_row(rec, k, p, str(r["file"]), int(r["source_line"]))
        for c in ("op", "in_nelems", "out_nelems", "group_size"):
            t.at[idx, c] = pd.NA if new[c] is None else new[c]
    if categorical:
        t["op"] = t["op"].astype("category")
    return t
