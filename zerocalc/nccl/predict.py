"""What NCCL's model predicts for one call, and the NCCL version a file states.

:func:`predict` is NCCL's choice for a byte count (:meth:`zerocalc.nccl.model.Tuning.choose`) and
its time, or, with a tuner configuration, the choice and channels the tuner imposes
(:func:`zerocalc.nccl.tuner.tuned_choice`), or the pair aws-ofi-nccl's tuner plugin returns where it
returns one (:func:`ofi_pair`, :mod:`zerocalc.nccl.ofi_tuner`); a topology carrying a calibration
(``nccl_calibration``, written by ``zerocalc fit --out``) replaces the model's time of a pair by the
fitted ``α + bytes / bw`` where it was fitted for the same collective and group size: the pair's own
fit (or, for a pair the sweep picked at too few sizes for one, the model's time × the pair's
``model_scale``), else the sweep-wide one (``any``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from zerocalc.errors import ConfigError
from zerocalc.nccl.enabled import ENV_REASONS
from zerocalc.nccl.launch import TIMED, Launch, LaunchEnv, channel_share, launch
from zerocalc.nccl.model import Tuning
from zerocalc.nccl.ofi_cxi import rendezvous_us
from zerocalc.nccl.ofi_tuner import OfiTuner, ofi_choice
from zerocalc.nccl.tables import Algorithm, Collective, Protocol, parse_version
from zerocalc.nccl.tuner import TunerConfig, tuned_choice
from zerocalc.topology import Calibration

ANY = "any"

_LIB = re.compile(r"\b[nr]ccl-library=(\d{4,6})\b")
_LOG = re.compile(r"NCCL version (\d+\.\d+\.\d+)")


def version_from_text(lines: Iterable[str]) -> str | None:
    """The NCCL library version a file states, or ``None``.

    nccl-tests ≥ 2.13 prints ``# nccl-tests version X nccl-headers=H nccl-library=L`` with
    ``NCCL_VERSION_CODE`` (:func:`zerocalc.traces.nccl_tests.nccl_version_from_code`); NCCL's own
    log prints ``NCCL version 2.19.3+cuda12.2`` (``init.cc``, with ``NCCL_DEBUG=VERSION`` or INFO);
    rccl-tests 2.17.9 and later prints ``# rccl-tests version X rccl-headers=H rccl-library=L`` (RCCL's code).
    The library wins over the headers: it is what ran.
    """
    for line in lines:
        m = _LIB.search(line)
        if m:
            from zerocalc.traces.nccl_tests import nccl_version_from_code

            return nccl_version_from_code(int(m[1]))
        m = _LOG.search(line)
        if m:
            return m[1]
    return None


_CUDA_BUILD = re.compile(r"NCCL version \d+\.\d+\.\d+\+cuda(\d+)\.(\d+)")


def cuda_build_from_text(lines: Iterable[str]) -> tuple[int, int] | None:
    """The CUDA release the NCCL library that ran was built with, as its version line states it
    (``NCCL version 2.19.3+cuda12.2``: ``CUDART_VERSION`` at build time, ``init.cc`` ``showVersion``), or
    ``None``. NCCL's model reads it once (:func:`zerocalc.nccl.model.tune`'s ``cuda_build``)."""
    for line in lines:
        m = _CUDA_BUILD.search(line)
        if m:
            return int(m[1]), int(m[2])
    return None


def as_nccl_collective(op: str) -> Collective:
    """The NCCL collective of an nccl-tests / zerocalc op name; :class:`ConfigError` otherwise."""
    try:
        return Collective(str(op))
    except ValueError:
        raise ConfigError(f"NCCL's cost model prices {', '.join(c.value for c in Collective)}; "
                          f"not {op!r}", option="op") from None


@dataclass(frozen=True)
class Prediction:
    algorithm: Algorithm
    protocol: Protocol
    time_s: float
    calibrated: bool = False
    channels: int | None = None  # imposed by a tuner (None: NCCL's own)
    tuner_line: int | None = None  # the tuner rule that chose the pair
    launch: Launch | None = None  # the channels NCCL launches the call on (zerocalc.nccl.launch)
    #: the time on all the communicator's channels, as NCCL prices it (``time_s`` when the launch keeps them)
    all_channels_s: float | None = None
    #: aws-ofi-nccl's tuner plugin chose the pair (:func:`ofi_pair`), not NCCL's model
    ofi_chose: bool = False


def ofi_pair(tuning: Tuning, coll: Collective, n_bytes: float, ofi: OfiTuner,
             tuner_api: int) -> tuple[Algorithm, Protocol] | None:
    """The pair aws-ofi-nccl's tuner ``ofi`` makes an NCCL of tuner API ``tuner_api`` run, ``None`` where
    NCCL's own model chooses: where the plugin returns nothing, and under API v3 and later where NCCL
    ignores the pair it returns (left out by ``NCCL_ALGO`` / ``NCCL_PROTO`` or not supported: NCCL's v2
    wrapper then leaves the cost table as it is, ``src/plugin/tuner/tuner_v2.cc``). Under API v1/v2 NCCL
    runs the pair as returned (``src/enqueue.cc`` ``getTunerInfo``). ``nvlsSupport`` is whether the
    communicator can run NVLS Tree for the call."""
    m = tuning.machine
    nvls = tuning.entries.get((coll, Algorithm.NVLS_TREE, Protocol.SIMPLE))
    # comm->nvlsSupport: the machine's NVLS, unless NCCL_NVLS_ENABLE=0 (NCCL_ALGO does not change it)
    nvls_support = (m.nvls and nvls is not None and nvls.bandwidth_GBps > 0
                    and (nvls.enabled or nvls.why_disabled in ENV_REASONS))
    def usable(a: Algorithm, p: Protocol) -> bool:  # not NCCL_ALGO_PROTO_IGNORE in the cost table
        e = tuning.entries.get((coll, a, p))
        return e is not None and e.enabled and e.bandwidth_GBps > 0

    pair = ofi_choice(ofi, coll, int(n_bytes), m.n_nodes, m.n_ranks, nvls_support, tuner_api=tuner_api,
                      usable=usable)
    if pair is None:
        return None
    e = tuning.entries.get((coll, *pair))
    runs = e is not None and e.bandwidth_GBps > 0
    if not runs or not (e.enabled or tuner_api < 3 and e.why_disabled in ENV_REASONS):
        return None  # API v3+: NCCL ignores the pair; v1/v2: a pair the machine cannot run is not run
    return pair


def launched(tuning: Tuning, coll: Collective, algo: Algorithm, proto: Protocol, n_bytes: float,
             version: tuple[int, int, int] | None = None, env: LaunchEnv | None = None) -> Launch:
    """The channels and threads NCCL ``version`` (default: the tuning's release) launches the call on
    (:func:`zerocalc.nccl.launch.launch`), from ``collChannels`` at v2.20-v2.21, else ``comm->nChannels``,
    under the thresholds and thread counts ``env`` sets."""
    env = env or LaunchEnv()
    version = version or parse_version(tuning.release.tag.lstrip("v").split("-")[0])
    ring = tuning.machine.graphs[Algorithm.RING]
    ch = tuning.channels
    start = ring.n_channels if ch is None else (
        ch.coll_channels if (2, 20, 0) <= version < (2, 22, 0) else ch.n_channels)
    return launch(coll, algo, proto, int(n_bytes), tuning.machine.n_ranks, start, version,
                  ring_bw_GBps=ring.bw_intra * ring.n_channels, thresholds=env.thresholds,
                  nthreads=env.nthreads, ll128_nthreads=env.ll128_nthreads)


def _rendezvous_s(tuning: Tuning, coll: Collective, a: Algorithm, p: Protocol, n_bytes: float,
                  channels: int) -> float:
    """The wait on the network's rendezvous of the call's messages on ``channels`` channels
    (:mod:`zerocalc.nccl.ofi_cxi`; 0 on a network that has none)."""
    m = tuning.machine
    return rendezvous_us(tuning.release, coll, a, p, n_bytes, channels, m.n_ranks, m.n_nodes,
                         m.net_eager_bytes) / 1e6


def predict(tuning: Tuning, coll: Collective, n_bytes: float,
            calibration: Sequence[Calibration] = (), tuner: TunerConfig | None = None,
            tuner_api: int = 3, version: tuple[int, int, int] | None = None,
            launch_env: LaunchEnv | None = None, ofi: OfiTuner | None = None,
            pair: tuple[Algorithm, Protocol] | None = None) -> Prediction:
    """NCCL's choice for ``n_bytes`` and its time (under ``tuner``, loaded into an NCCL of tuner API
    ``tuner_api``, when given); calibrated when a fit covers the pair (see module). Without a tuner the
    time is the call's on the channels NCCL ``version`` launches it on under ``launch_env``
    (:func:`launched`). With ``ofi`` (aws-ofi-nccl's tuner plugin, loaded into an NCCL of tuner API
    ``tuner_api``), the pair it returns where it returns one (:func:`ofi_pair`), on NCCL's own channels.
    With ``pair``, that pair's time whatever NCCL would choose (the algorithm a trace's kernels ran, at the
    protocol NCCL picks in it), launched and calibrated as NCCL's own choice is; ``time_s`` is ``None``
    where the machine cannot run it."""
    channels = line = run = full = None
    by_ofi = False
    if tuner is not None:
        c = tuned_choice(tuning, coll, n_bytes, tuner, tuner_api)
        a, p, t, channels = c.algorithm, c.protocol, c.time_s, c.channels
        line = c.rule.line if c.rule else None
    else:
        a, p, _ = tuning.choose(coll, n_bytes) if pair is None else (*pair, None)
        forced = ofi_pair(tuning, coll, n_bytes, ofi, tuner_api) if ofi is not None and pair is None else None
        if forced is not None:
            (a, p), by_ofi = forced, True
        run = launched(tuning, coll, a, p, n_bytes, version, launch_env)
        share = 1.0
        if a in TIMED:
            share = channel_share(run, tuning.channels.coll_channels if tuning.channels else run.start)
        given = by_ofi or pair is not None  # a pair NCCL ran or was told to run: priced where disabled too
        full = tuning.run_time_s(coll, a, p, n_bytes, disabled_ok=given)
        t = tuning.run_time_s(coll, a, p, n_bytes, share=share, disabled_ok=given) if share < 1.0 else full
        if full is not None and t is not None:
            wait = _rendezvous_s(tuning, coll, a, p, n_bytes, run.start)
            full += wait
            same = run.channels == run.start
            t += wait if same else _rendezvous_s(tuning, coll, a, p, n_bytes, run.channels)
    fits = [c for c in calibration if c.op == coll.value and c.ranks == tuning.machine.n_ranks]
    for c in fits:
        if c.algorithm == a.value and c.protocol == p.value and (t is not None or not c.model_scale):
            return Prediction(a, p, c.time_s(n_bytes, t), True, channels, line, run, ofi_chose=by_ofi)
    for c in fits:
        if c.algorithm == ANY and (t is not None or not c.model_scale):
            return Prediction(a, p, c.time_s(n_bytes, t), True, channels, line, run, ofi_chose=by_ofi)
    return Prediction(a, p, t, False, channels, line, run, full, by_ofi)
