"""The review commands: ``feasibility`` (the simulated ranks, the verdict on DeepSpeed #4582 and the
implementation plan, priced on a cluster by NCCL's cost model or the α-β one) and ``report`` (the
design-review PDF). Each only wires options to library calls.
"""

from __future__ import annotations

import typer

from zerocalc.cli.model_options import (
    PlanDtype,
    PlanFormat,
    PlanGradDtype,
    PlanMicroBatches,
    PlanN,
    PlanNcclAlgo,
    PlanNcclProto,
    PlanNcclVersion,
    PlanParamDtype,
    PlanPp,
    PlanPsi,
    PlanTimeModel,
    PlanTopology,
    PlanTp,
    ReportBucket,
    ReportDtype,
    ReportGpuMemory,
    ReportGpusPerNode,
    ReportGradDtype,
    ReportMicroBatches,
    ReportModel,
    ReportN,
    ReportNcclTuner,
    ReportOfiTuner,
    ReportOutput,
    ReportParamDtype,
    ReportPp,
    ReportPsi,
    ReportTimeModel,
    ReportTopology,
    ReportTp,
    ReportTrace,
    SimGpusPerNode,
    SimMicroBatches,
    SimN,
    SimSchemes,
    SimSeed,
    SimSteps,
)
from zerocalc.cli.options import (
    _MODEL_HELP,
    BUCKET_HELP,
    NcclAlgoOption,
    NcclEnvOption,
    NcclProtoOption,
    NcclVersionOption,
    _load_topology,
    _progress_bar,
    _read_tuners,
    _scheme_names,
    model_psi,
    output_format,
    warn_implausible,
)
from zerocalc.rendering import _feasibility_table


def feasibility_cmd(
    n: SimN = 4,
    steps: SimSteps = 20,
    seed: SimSeed = 0,
    micro_batches: SimMicroBatches = 1,
    schemes: SimSchemes = None,
    gpus_per_node: SimGpusPerNode = None,
    psi: PlanPsi = None,
    model: str | None = typer.Option(None, "--model", help=_MODEL_HELP),
    plan_n: PlanN = None,
    plan_tp: PlanTp = 1,
    plan_pp: PlanPp = 1,
    plan_micro_batches: PlanMicroBatches = None,
    topology: PlanTopology = "dgx-a100",
    dtype: PlanDtype = "fp16",
    param_dtype: PlanParamDtype = None,
    grad_dtype: PlanGradDtype = None,
    fmt: PlanFormat = "table",
    time_model: PlanTimeModel = None,
    nccl_version: PlanNcclVersion = None,
    nccl_algo: PlanNcclAlgo = None,
    nccl_proto: PlanNcclProto = None,
    bucket: str | None = typer.Option(None, "--bucket", help=BUCKET_HELP),
) -> None:
    """Simulate each scheme on N ranks training a small MLP, compare with data parallelism and the model,
    and state the verdict on DeepSpeed issue #4582 with the implementation plan it leads to, priced on a
    cluster."""
    from zerocalc.buckets import parse_bucket
    from zerocalc.errors import ConfigError
    from zerocalc.feasibility import FeasibilityConfig, run_feasibility

    fmt = output_format(fmt, ("table", "json"))
    call_bytes = None if bucket is None else parse_bucket(bucket)
    names = _scheme_names(schemes, "--schemes")
    plan = _plan_options(n, gpus_per_node, psi, model, plan_n, topology, (dtype, param_dtype, grad_dtype),
                         time_model, (nccl_version, nccl_algo, nccl_proto, call_bytes))
    cfg = FeasibilityConfig(n=n, steps=steps, seed=seed, micro_batches=micro_batches,
                            gpus_per_node=None if gpus_per_node is None else min(gpus_per_node, n))
    if plan_n is not None and plan_n < 1:
        raise ConfigError(f"must be a whole number of ranks ≥ 1, got {plan_n}", option="--plan-n")
    with _progress_bar("simulating") as progress:
        result = run_feasibility(cfg, names, plan_micro_batches=plan_micro_batches, plan_tp=plan_tp,
                                 plan_pp=plan_pp, progress=progress, **plan)
    if fmt == "json":
        import json

        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        typer.echo(_feasibility_table(result))


def _plan_options(n: int, gpus_per_node: int | None, psi: str | None, model: str | None, plan_n: int | None,
                  topology: str, dtypes: tuple, time_model: str | None, nccl: tuple) -> dict:
    """``feasibility``'s options of the run the plan is priced for, read as ``run_feasibility``'s
    ``plan_*`` arguments: Ψ, the wire's bytes (``dtypes``: --dtype, --param-dtype, --grad-dtype; whole bytes
    per element, every dtype zerocalc names), the topology, N and its GPUs a node, the time model and
    ``nccl`` (--nccl-version, --nccl-algo, --nccl-proto, --bucket's bytes a call)."""
    from zerocalc.dtypes import dtype_bytes

    nccl_version, nccl_algo, nccl_proto, call_bytes = nccl
    plan_psi, _ = model_psi(psi, model, default="7.5e9")
    comm_bytes = dtype_bytes(dtypes[0])
    param_bytes, grad_bytes = (None if d is None else dtype_bytes(d) for d in dtypes[1:])
    topo = _load_topology(topology, None, None, None, None)
    return dict(plan_psi=plan_psi, plan_comm_bytes=comm_bytes, plan_topology=topo,
                plan_n=n if plan_n is None else plan_n,
                plan_gpus_per_node=topo.gpus_per_node if gpus_per_node is None else gpus_per_node,
                plan_time_model=None if time_model is None else time_model.strip().lower(),
                plan_nccl=dict(nccl_version=nccl_version, nccl_algo=nccl_algo, nccl_proto=nccl_proto,
                               call_bytes=call_bytes),
                plan_param_bytes=param_bytes, plan_grad_bytes=grad_bytes)


def report_cmd(
    output: ReportOutput = "reports/zero-colocation-review.pdf",
    psi: ReportPsi = None,
    n: ReportN = 64,
    gpus_per_node: ReportGpusPerNode = None,
    topology: ReportTopology = "dgx-a100",
    dtype: ReportDtype = "fp16",
    trace: ReportTrace = None,
    model: ReportModel = None,
    gpu_memory: ReportGpuMemory = None,
    nccl_tuner: ReportNcclTuner = None,
    ofi_tuner: ReportOfiTuner = None,
    nccl_version: NcclVersionOption = None,
    nccl_algo: NcclAlgoOption = None,
    nccl_proto: NcclProtoOption = None,
    nccl_env: NcclEnvOption = None,
    time_model: ReportTimeModel = None,
    bucket: ReportBucket = None,
    param_dtype: ReportParamDtype = None,
    grad_dtype: ReportGradDtype = None,
    micro_batches: ReportMicroBatches = 1,
    tp: ReportTp = 1,
    pp: ReportPp = 1,
) -> None:
    """Write the design-review PDF: question, model, derivations, figures, validation, verdict, plan.

    With --nccl-version, --nccl-algo, --nccl-proto or --nccl-env (or a topology calibrated by fit --out),
    the schemes are also priced with NCCL's cost model under them, as table prices them; the plan is
    timed by NCCL's model (--time-model) under the version and NCCL_ALGO / NCCL_PROTO."""
    import time
    from pathlib import Path

    start = time.perf_counter()

    def progress(message: str) -> None:
        typer.echo(f"[{time.perf_counter() - start:5.1f} s] {message}", err=True)

    # Every option and input is checked before any work (and before any progress line): the
    # cluster, the output path, the traces; only then are the model and matplotlib loaded.
    from zerocalc.report.inputs import check_output, check_traces

    config = _report_config(
        psi=psi, model=model, n=n, gpus_per_node=gpus_per_node, topology=topology, dtype=dtype,
        traces=tuple(Path(t) for t in trace or ()), gpu_memory=gpu_memory, nccl_tuner=nccl_tuner,
        ofi_tuner=ofi_tuner, nccl_version=nccl_version, nccl_algo=nccl_algo, nccl_proto=nccl_proto,
        nccl_env=nccl_env, time_model=time_model, bucket=bucket, micro_batches=micro_batches,
        param_dtype=param_dtype, grad_dtype=grad_dtype, tp=tp, pp=pp)
    check_output(output, config)
    check_traces(config.traces)
    _nccl_refused_before_work(config)
    progress("importing the model")
    from zerocalc.report import write_report

    write_report(output, config, progress)
    progress(f"wrote {output}")


def _report_config(*, psi, model, n, gpus_per_node, topology, dtype, traces, gpu_memory, nccl_tuner,
                   ofi_tuner, nccl_version, nccl_algo, nccl_proto, nccl_env, time_model, bucket,
                   micro_batches, param_dtype, grad_dtype, tp, pp):
    """``report``'s options as a checked :class:`~zerocalc.report.config.ReportConfig`: the cluster (a run's
    share of each node, as ``table`` prices it), Ψ, the dtypes, the NCCL options and tuners, the bucket;
    each bad one a :class:`~zerocalc.errors.ConfigError` naming it."""
    from zerocalc.buckets import parse_bucket
    from zerocalc.dtypes import canonical_dtype
    from zerocalc.nccl.env_given import parse_given
    from zerocalc.report.config import ReportConfig
    from zerocalc.topology import PRESETS
    from zerocalc.topology.devices import run_nodes
    from zerocalc.units import parse_bytes

    env_given = parse_given(nccl_env, nccl_algo, nccl_proto)
    loaded = _load_topology(topology, None, None, None, None)
    topo, _ = run_nodes(loaded, n, gpus_per_node)
    tuner, ofi = _read_tuners(nccl_tuner, ofi_tuner, topo)
    psi_count, _ = model_psi(psi, model, default="7.5e9")
    warn_implausible(psi=psi_count, n=n)
    return ReportConfig(psi=float(psi_count), n=n,
                        gpus_per_node=topo.gpus_per_node if gpus_per_node is None else gpus_per_node,
                        topology=topo if topology not in PRESETS or topo != loaded else topology,
                        comm_dtype=canonical_dtype(dtype), traces=traces,
                        gpu_memory_bytes=None if gpu_memory is None else float(
                            parse_bytes(gpu_memory, "--gpu-memory")),
                        nccl_tuner=tuner, ofi_tuner=ofi, nccl_version=nccl_version, nccl_algo=nccl_algo,
                        nccl_proto=nccl_proto, nccl_env=tuple(env_given.items()),
                        plan_time_model=None if time_model is None else time_model.strip().lower(),
                        bucket_bytes=None if bucket is None else parse_bucket(bucket),
                        micro_batches=micro_batches,
                        param_dtype=None if param_dtype is None else canonical_dtype(param_dtype),
                        grad_dtype=None if grad_dtype is None else canonical_dtype(grad_dtype),
                        tp=tp, pp=pp)


def _nccl_refused_before_work(config) -> None:
    """The report's pricing with NCCL's cost model tried once before any work, so that what it cannot price
    (a version not modelled, a restriction leaving a collective no pair, a rule or plugin this cluster
    cannot run, a topology without the fields the model needs) is refused with no PDF written; and the
    plan's pricing (:func:`zerocalc.feasibility.plan_pricing`: its time model, version, restrictions and
    bucket)."""
    from zerocalc.feasibility import plan_pricing
    from zerocalc.report.simulation import plan_nccl
    from zerocalc.topology import get_topology

    plan_pricing(get_topology(config.topology), config.plan_time_model, plan_nccl(config))
    if not config.nccl_priced:
        return
    from zerocalc.report.sweeps import nccl_priced, nccl_under_tuner

    if config.nccl_tuner is not None or config.ofi_tuner is not None:
        nccl_under_tuner(config)
    else:
        nccl_priced(config)
