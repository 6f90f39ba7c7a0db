"""Tuner plugin configurations: rules that override NCCL's (algorithm, protocol, channels) choice.

NCCL loads a *tuner plugin* (``NCCL_TUNER_PLUGIN``) and asks it, per collective call, for the
algorithm, protocol and channel count (``getCollInfo``). zerocalc reads the rules of NCCL's own
example tuner, whose configuration is documented (first in NCCL v2.28.3 as ``ext-tuner/example``;
``plugins/tuner/example`` in v2.30.7: README.md, ``nccl_tuner.conf``, ``plugin.c``), one CSV line per
rule::

    collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]

with the names NCCL's ``plugin.c`` compares exactly (``allreduce``, ``tree``, ``nvls_tree``,
``ll128``...), ``-1`` for "any" (nNodes, nRanks, numPipeOps, regBuff) or "keep" (channels), byte
bounds inclusive, ``#`` comment lines. zerocalc refuses what ``plugin.c`` would silently turn into
a default (an unknown name becomes ``ring`` / ``simple`` / ``allreduce`` there), and any line that
does not have 8 to 10 fields, each error naming the file and line.

What a rule does depends on the tuner API of the NCCL that loads the plugin (:func:`tuner_api`); the
example plugin itself is built for the cost-table API, so under v1/v2 zerocalc prices what a plugin
with the same rules returning ``(algorithm, protocol, nChannels)`` would make NCCL do:

- **API v1/v2** (NCCL 2.19-2.21; ``src/enqueue.cc`` ``getTunerInfo``): the plugin returns the
  algorithm and protocol, and NCCL uses them as they are, without its own cost model, even when
  ``NCCL_ALGO`` / ``NCCL_PROTO`` leave that pair out;
- **API v3 and later** (NCCL 2.22 on; ``ncclGetAlgoInfo``): the plugin edits NCCL's cost table,
  setting the rule's pair to 0 unless NCCL marked it ``NCCL_ALGO_PROTO_IGNORE`` (left out by
  ``NCCL_ALGO`` / ``NCCL_PROTO`` or not supported), then NCCL picks the least cost; the example
  plugin then tries the next matching rule (``plugin.c``). A v2 plugin under a v3+ NCCL is wrapped
  the same way (``src/plugin/tuner/tuner_v2.cc``).

Channels: the example plugin sets ``*nChannels = 1`` before matching and only a rule's own count
(not ``-1``) replaces it, and NCCL honours any non-zero count (``nMaxChannels``); so with this plugin
loaded a call no rule matches, or a rule with ``-1``, runs on one channel. The time of a capped call
is :meth:`zerocalc.nccl.model.Tuning.time_s` with ``channels``.

A rule naming an algorithm or protocol the communicator cannot run (no NVLink SHARP, no CollNet,
PAT with several GPUs per node, an algorithm the NCCL release does not have, a pair NCCL never
prices for that collective) is refused when it matches the communicator (its nodes and ranks):
NCCL would skip it under API v3+ and fail under v2, and either way the file does not describe this
machine. nccl-tests calls run one operation per group (``numPipeOps`` 1) on unregistered buffers
(``regBuff`` 0, without ``-R``); zerocalc matches with those.

Google's A3+ tuner plugin (GPUDirect-TCPXO) reads a ``TunerConfigs`` textproto instead; that
plugin is distributed as a binary and the meaning of its fields (``per_rank_message_size``...) is
not published, so such a file is refused with a line saying so rather than read by guesswork.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from zerocalc.errors import ConfigError
from zerocalc.nccl.enabled import ENV_REASONS, applies
from zerocalc.nccl.model import Tuning
from zerocalc.nccl.tables import Algorithm, Collective, Protocol, parse_version

OPTION = "--nccl-tuner"

#: ``plugin.c`` names (compared with ``strcmp``) → zerocalc's enums.
COLLECTIVES = {"broadcast": Collective.BROADCAST, "reduce": Collective.REDUCE,
               "allgather": Collective.ALL_GATHER, "reducescatter": Collective.REDUCE_SCATTER,
               "allreduce": Collective.ALL_REDUCE}
ALGORITHMS = {"tree": Algorithm.TREE, "ring": Algorithm.RING, "collnet_direct": Algorithm.COLLNET_DIRECT,
              "collnet_chain": Algorithm.COLLNET_CHAIN, "nvls": Algorithm.NVLS,
              "nvls_tree": Algorithm.NVLS_TREE, "pat": Algorithm.PAT}
PROTOCOLS = {"ll": Protocol.LL, "ll128": Protocol.LL128, "simple": Protocol.SIMPLE}
FIELDS = ("collective_type", "min_bytes", "max_bytes", "algorithm", "protocol", "channels", "nNodes",
          "nRanks", "numPipeOps", "regBuff")
NCCL_TESTS_PIPE_OPS, NCCL_TESTS_REG_BUFF = 1, 0


@dataclass(frozen=True)
class TunerRule:
    """One CSV line of NCCL's example tuner (``-1``: any / keep)."""

    collective: Collective
    min_bytes: int
    max_bytes: int
    algorithm: Algorithm
    protocol: Protocol
    channels: int
    n_nodes: int
    n_ranks: int
    num_pipe_ops: int
    reg_buff: int
    line: int

    def matches(self, coll: Collective, n_bytes: int, n_nodes: int, n_ranks: int,
                pipe_ops: int = NCCL_TESTS_PIPE_OPS, reg_buff: int = NCCL_TESTS_REG_BUFF) -> bool:
        """``pluginGetCollInfo``'s test (``plugin.c``)."""
        return (self.collective == coll and self.min_bytes <= n_bytes <= self.max_bytes
                and self.n_nodes in (-1, n_nodes) and self.n_ranks in (-1, n_ranks)
                and self.num_pipe_ops in (-1, pipe_ops) and self.reg_buff in (-1, reg_buff))

    def for_communicator(self, n_nodes: int, n_ranks: int) -> bool:
        return self.n_nodes in (-1, n_nodes) and self.n_ranks in (-1, n_ranks)


@dataclass(frozen=True)
class TunerConfig:
    """The rules of one tuner configuration file, in file order (the first that applies wins)."""

    source: str
    rules: tuple[TunerRule, ...]
    format: str = "nccl-example-csv"

    def where(self, rule: TunerRule) -> str:
        return f"{self.source}:{rule.line}"


_PROTO_TEXT = re.compile(r"^\s*(#\s*proto-(file|message):|[A-Za-z_][A-Za-z0-9_]*\s*(\{|:\s*\{))")


def _int(text: str, name: str, fail, *, low: int, any_ok: bool) -> int:
    if not re.fullmatch(r"-?\d+", text):
        fail(f"{name} must be a whole number, got {text!r}")
    v = int(text)
    if not (v >= low or (any_ok and v == -1)):
        fail(f"{name} must be {'-1 or ' if any_ok else ''}≥ {low}, got {v}")
    return v


def parse_tuner(lines: Iterable[str], source: str) -> TunerConfig:
    """The rules of a tuner configuration file's text (the caller reads the file).

    Every error is a :class:`ConfigError` for ``--nccl-tuner`` naming ``source`` and the line.
    """
    rules = []
    for i, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#") and not _PROTO_TEXT.match(line):
            continue

        def fail(message: str, i: int = i):
            raise ConfigError(f"{source}:{i}: {message}", option=OPTION)

        if _PROTO_TEXT.match(line):
            fail("a protobuf text file (Google's A3+ tuner plugin's TunerConfigs?): that plugin is "
                 "distributed as a binary and the meaning of its fields is not published, so zerocalc does "
                 "not read it; write the rules in NCCL's example tuner CSV format "
                 "(collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks"
                 "[,numPipeOps[,regBuff]])")
        fields = [f.strip() for f in line.split(",")]
        if not 8 <= len(fields) <= 10 or any(f == "" for f in fields):
            fail(f"expected 8 to 10 comma-separated fields ({','.join(FIELDS[:8])}[,numPipeOps[,regBuff]]), "
                 f"got {len(fields)}{' with an empty one' if any(f == '' for f in fields) else ''}: "
                 f"{line.strip()[:80]!r}")
        names = []
        for value, table, what in ((fields[0], COLLECTIVES, "collective_type"),
                                   (fields[3], ALGORITHMS, "algorithm"), (fields[4], PROTOCOLS, "protocol")):
            if value not in table:
                fail(f"{what} {value!r} is not a name NCCL's example tuner reads (it compares exactly: "
                     f"{', '.join(table)})")
            names.append(table[value])
        lo = _int(fields[1], "min_bytes", fail, low=0, any_ok=False)
        hi = _int(fields[2], "max_bytes", fail, low=0, any_ok=False)
        if lo > hi:
            fail(f"min_bytes {lo} is above max_bytes {hi}")
        channels = _int(fields[5], "channels", fail, low=1, any_ok=True)
        n_nodes = _int(fields[6], "nNodes", fail, low=1, any_ok=True)
        n_ranks = _int(fields[7], "nRanks", fail, low=1, any_ok=True)
        pipe = _int(fields[8], "numPipeOps", fail, low=1, any_ok=True) if len(fields) > 8 else -1
        reg = _int(fields[9], "regBuff", fail, low=0, any_ok=True) if len(fields) > 9 else -1
        if reg > 1:
            fail(f"regBuff must be 0, 1 or -1, got {reg}")
        rules.append(TunerRule(names[0], lo, hi, names[1], names[2], channels, n_nodes, n_ranks, pipe, reg,
                               i))
    if not rules:
        raise ConfigError(f"{source}: no tuner rules (lines "
                          "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks)",
                          option=OPTION)
    return TunerConfig(source, tuple(rules))


def tuner_api(version: str) -> int:
    """The tuner plugin API the NCCL ``version`` calls: 1 (2.19-2.20), 2 (2.21), 3 or later (2.22 on:
    the cost-table API; ``src/include/nccl_tuner.h`` / ``src/include/plugin/nccl_tuner.h`` of each
    release). NCCL before 2.19 loads no tuner plugin: a :class:`ConfigError`."""
    major, minor, _ = parse_version(version)
    if (major, minor) < (2, 19):
        raise ConfigError(f"NCCL {version} has no tuner plugin API (it first appears in NCCL 2.19)",
                          option=OPTION)
    return 1 if minor < 21 else 2 if minor == 21 else 3


@dataclass(frozen=True)
class TunedChoice:
    """The pair a call runs with under a tuner, its time, the channels the tuner imposes and the rule."""

    algorithm: Algorithm
    protocol: Protocol
    time_s: float
    channels: int
    rule: TunerRule | None


def _runnable(tuning: Tuning, coll: Collective, a: Algorithm, p: Protocol) -> str:
    """'' when the communicator can run (coll, a, p) (perhaps left out by the environment), else why not."""
    if not applies(tuning.release, coll, a, p):
        return (f"NCCL {tuning.release.name} has no {a.value}" if a not in tuning.release.algorithms
                else f"NCCL never runs {coll.value} with {a.value}/{p.value}")
    e = tuning.entries.get((coll, a, p))
    if e is None or not e.enabled and e.why_disabled not in ENV_REASONS:
        return e.why_disabled if e is not None else "no graph for it"
    if e.bandwidth_GBps <= 0:
        return "no bandwidth for it on this machine"
    return ""


def check_rules(tuning: Tuning, config: TunerConfig, topology: str) -> None:
    """Refuse a rule that matches this communicator but names a pair it cannot run (module docstring)."""
    m = tuning.machine
    for r in config.rules:
        if not r.for_communicator(m.n_nodes, m.n_ranks):
            continue
        why = _runnable(tuning, r.collective, r.algorithm, r.protocol)
        if why:
            raise ConfigError(f"{config.where(r)}: {r.algorithm.value}/{r.protocol.value} for "
                              f"{r.collective.value} cannot run on {topology} with {m.n_ranks} ranks on "
                              f"{m.n_nodes} node(s) ({why})", option=OPTION)


def tuned_choice(tuning: Tuning, coll: Collective, n_bytes: float, config: TunerConfig,
                 api: int) -> TunedChoice:
    """The pair, time and channels of one call with the example tuner's ``config`` loaded into an NCCL
    of tuner ``api`` (:func:`tuner_api`); see the module docstring for the rules."""
    m, n = tuning.machine, int(n_bytes)
    channels, chosen = 1, None
    for r in config.rules:
        if not r.matches(coll, n, m.n_nodes, m.n_ranks):
            continue
        e = tuning.entries.get((coll, r.algorithm, r.protocol))
        if api >= 3 and (e is None or not e.enabled or e.bandwidth_GBps <= 0):
            continue  # NCCL_ALGO_PROTO_IGNORE: the example plugin tries the next rule
        chosen = r
        channels = r.channels if r.channels != -1 else 1
        break
    if chosen is None:
        a, p, _ = tuning.choose(coll, n)
    else:
        a, p = chosen.algorithm, chosen.protocol
    t = tuning.run_time_s(coll, a, p, n, channels=channels, disabled_ok=True)
    if t is None:  # check_rules keeps unrunnable pairs out; a v2 tuner's env-disabled pair has a bandwidth
        raise ConfigError(f"{config.where(chosen) if chosen else config.source}: {a.value}/{p.value} has no "
                          f"bandwidth for {coll.value} here", option=OPTION)
    return TunedChoice(a, p, t, channels, chosen)
