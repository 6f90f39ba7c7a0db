"""Everything the report shows, computed from the public API: :func:`collect`."""

from __future__ import annotations

from zerocalc.report.config import DEFAULT_CONFIG, Progress, ReportConfig, ReportData
from zerocalc.report.measured import (
    bundled_nccl_tests,
    bundled_traces,
    nccl_tests_fit,
    trace_checks,
    validation_frame,
)
from zerocalc.report.simulation import (
    cluster_verdict,
    divergence_vs_steps,
    feasibility_result,
    plan_on_cluster,
)
from zerocalc.report.sweeps import (
    bytes_vs_n,
    checked_identities,
    memory_vs_n,
    scheme_derivations,
    table1_overlay,
    time_vs_psi,
    volume_table,
)


def trace_timing(config: ReportConfig) -> dict | None:
    """How the traces given on the command line are timed: by NCCL's model on the report's topology under its
    NCCL version and ``NCCL_ALGO`` / ``NCCL_PROTO`` (``check TRACE --topology``); ``None`` for the bundled
    traces (run on other machines than the one under review) and on AMD GPUs (RCCL's per-call pricing of a
    trace is not modelled)."""
    from zerocalc.topology import get_topology

    topo = get_topology(config.topology)
    if not config.traces or topo.gpu_arch is not None:
        return None
    return {"topology": topo, "nccl_version": config.nccl_version, "nccl_algo": config.nccl_algo,
            "nccl_proto": config.nccl_proto}


def collect(config: ReportConfig = DEFAULT_CONFIG, progress: Progress | None = None) -> ReportData:
    """Compute everything the report shows from the public API.

    The data several sections share first (the trace checks, the model's table and sweeps, the
    feasibility simulation and its plan), then each section's own ``collect``
    (:func:`zerocalc.report.sections.collect_all`).
    """
    from zerocalc.report.sections import collect_all

    say = progress or (lambda _msg: None)
    # the traces first: a trace that cannot be read or checked fails before the simulation
    say("checking the model against " + ("the given traces" if config.traces else "the bundled real traces"))
    paths = {p.name: (p,) for p in config.traces} if config.traces else bundled_traces()
    checks = trace_checks(paths, nccl=trace_timing(config))
    say("evaluating the model at the chosen configuration")
    table = volume_table(config)
    say("deriving the symbolic volume, time and memory of every scheme")
    derivations = scheme_derivations()
    identities = checked_identities()
    say("sweeping N and Ψ for the figures")
    data = ReportData(
        config=config,
        table=table,
        bytes_vs_n=bytes_vs_n(config),
        time_vs_psi=time_vs_psi(config),
        memory_vs_n=memory_vs_n(config),
        memory_points=table1_overlay(config),
        derivations=derivations,
        identities=identities,
    )
    data.extra["checks"] = checks
    data.extra["validation"] = validation_frame(checks)
    say("simulating every scheme on ranks that train (feasibility)")
    result = feasibility_result(config)
    data.extra["feasibility"] = result
    data.extra["divergence"] = divergence_vs_steps(config, result)
    data.extra["plan"] = plan_on_cluster(config, result)
    data.extra["verdict_short"] = cluster_verdict(config, result, data.extra["plan"])
    if not config.traces:
        say("fitting α and β to the bundled nccl-tests sweep")
        data.extra["fit_summary"], data.extra["fit_points"] = nccl_tests_fit(bundled_nccl_tests())
    collect_all(config, data, say)
    return data
