"""The options of ``zerocalc check`` checked before anything is read: those only a check of nccl-tests
sweeps reads, those only a check of traces reads, and ``--topology`` with the NCCL options where a check
of traces times its calls by NCCL's model (:mod:`zerocalc.validate.nccl_timing`). Each refusal is a
:class:`~zerocalc.errors.ConfigError` naming the option.
"""

from __future__ import annotations

from zerocalc.cli.options import _scheme_names


def _trace_nccl(topology: str, nccl_version: str | None, nccl_algo: str | None,
                nccl_proto: str | None) -> dict:
    """``--topology`` and the NCCL options of a check of traces, checked before the traces are read: the
    step's calls are then timed by NCCL's model there (:mod:`zerocalc.validate.nccl_timing`)."""
    from zerocalc.cli.options import _load_topology
    from zerocalc.errors import ConfigError
    from zerocalc.nccl.env import restrictions

    topo = _load_topology(topology, None, None, None, None)
    if topo.gpu_arch is not None:
        raise ConfigError(f"topology {topo.name!r} is of AMD GPUs: zerocalc times a trace's calls with "
                          "NCCL's model, not RCCL's", option="--topology")
    if nccl_version is not None:
        from zerocalc.nccl import release_for

        release_for(nccl_version)
    restrictions(nccl_algo, nccl_proto, nccl_version)
    return dict(topology=topo, nccl_version=nccl_version, nccl_algo=nccl_algo, nccl_proto=nccl_proto)


def _sweep_options_refused(ofi_tuner: str | None, register: int | None, nccl_env: list[str] | None) -> None:
    """A check of traces refuses the options only a check of nccl-tests sweeps reads."""
    from zerocalc.errors import ConfigError

    if ofi_tuner is not None:
        raise ConfigError("prices nccl-tests sweeps under aws-ofi-nccl's tuner; give a sweep",
                          option="--ofi-tuner")
    if register is not None:
        raise ConfigError("says how an nccl-tests sweep registered its buffers; give a sweep",
                          option="--local-register")
    if nccl_env:
        raise ConfigError("prices nccl-tests sweeps under the NCCL environment they ran with; give a sweep",
                          option="--nccl-env")


def _trace_options_refused(given: dict) -> None:
    """A check of nccl-tests sweeps refuses the options only a check of traces reads (each was ignored in
    silence before), naming the first given and what stands for it in a sweep."""
    from zerocalc.errors import ConfigError

    instead = {"--gpus-per-node": "its nodes are its topology's, holding the ranks its device lines list on "
                                  "each host (--topology to choose the hardware)",
               "--dtype": "its element type is its table's (nccl-tests -d)"}
    for flag, value in given.items():
        if value is not None and value != []:
            why = instead.get(flag, "it has no use for it")
            raise ConfigError("reads traces against the schemes; an nccl-tests sweep is priced size by size "
                              f"with NCCL's model, and {why}", option=flag)


def _local_register(text: str | None) -> int | None:
    """``--local-register``: nccl-tests' ``-R`` value, 0, 1 or 2 (:data:`zerocalc.validate.symmetric.
    REGISTER_VALUES`); anything else is a :class:`~zerocalc.errors.ConfigError`."""
    from zerocalc.errors import ConfigError

    if text is None:
        return None
    from zerocalc.validate.symmetric import REGISTER_VALUES

    if text.strip() not in {str(v) for v in REGISTER_VALUES}:
        raise ConfigError(f"must be 0, 1 or 2 (nccl-tests -R), got {text!r}", option="--local-register")
    return int(text)


def _check_options(nccl_version: str | None, nccl_tuner: str | None, micro_batches: int | None,
                   reuse_distance: float | None, scheme: list[str] | None,
                   gpus_per_node: int | None, timed: bool = False) -> list[str] | None:
    """The options of a check of traces (not sweeps) checked before anything is read; returns the
    schemes named (``None``: every scheme). ``timed``: the traces' calls are timed by NCCL's model
    (``--topology``), which takes ``--nccl-version`` but no tuner."""
    from zerocalc.errors import ConfigError

    if timed and nccl_tuner is not None:
        raise ConfigError("prices nccl-tests sweeps under a tuner's rules; a trace's calls are timed by "
                          "NCCL's model as it chooses", option="--nccl-tuner")
    for flag, given in (("--nccl-version", None if timed else nccl_version), ("--nccl-tuner", nccl_tuner)):
        if given is not None:
            raise ConfigError("prices nccl-tests sweeps with NCCL's model; give --topology too", option=flag)
    if micro_batches is not None and micro_batches < 1:
        raise ConfigError(f"must be a positive integer, got {micro_batches}", option="--micro-batches")
    if reuse_distance is not None and not reuse_distance >= 0:
        raise ConfigError(f"must be a number ≥ 0, got {reuse_distance:g}", option="--reuse-distance")
    names = _scheme_names(scheme, "--schemes")
    if gpus_per_node is not None and gpus_per_node < 1:  # before reading the traces
        raise ConfigError("must be a whole number ≥ 1", option="--gpus-per-node")
    return names
