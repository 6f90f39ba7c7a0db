"""The option declarations of ``table``, ``feasibility`` and ``report`` (:mod:`zerocalc.cli.model_commands`,
:mod:`zerocalc.cli.review_commands`): each option's flag, type and help as one ``Annotated`` alias, so each
command's signature is one line an option and its body the stages that read them."""

from __future__ import annotations

from typing import Annotated

import typer

from zerocalc.cli.options import _DTYPE_HELP, _MODEL_HELP, _OFI_HELP, _TOPOLOGY_HELP, _TUNER_HELP, BUCKET_HELP

# --- table ---------------------------------------------------------------------------------------------

TablePsi = Annotated[str, typer.Option("--psi",
                                       help="Parameters: 7.5e9, 7.5B, 175B, 1T [default: 7.5e9].")]
TableN = Annotated[int, typer.Option("--n", help="GPUs in the world: the data-parallel degree N when --tp "
                                                 "and --pp are 1, else N = n/(tp·pp).")]
TableGpusPerNode = Annotated[int, typer.Option("--gpus-per-node", help="GPUs per node [default: the "
                                                                       "topology's].")]
TableTopology = Annotated[str, typer.Option("--topology", help=_TOPOLOGY_HELP)]
TableDtype = Annotated[str, typer.Option("--dtype", help=_DTYPE_HELP + " Sets both sides [default: fp16].")]
TableParamDtype = Annotated[str, typer.Option(
    "--param-dtype", help="Dtype of the parameter-side collectives (all-gather, broadcast of parameters), "
                          "e.g. FSDP2 param_dtype [default: --dtype].")]
TableGradDtype = Annotated[str, typer.Option(
    "--grad-dtype", help="Dtype of the gradient-side collectives (all-reduce, reduce-scatter, reduce), e.g. "
                         "FSDP2 reduce_dtype [default: --dtype].")]
TableMicroBatches = Annotated[int, typer.Option(
    "--micro-batches", help="Micro-batches per optimizer step (gradient accumulation); each scheme runs its "
                            "collectives per micro-batch or per step as its implementation does (zerocalc "
                            "derive SCHEME).")]
TableGradSync = Annotated[str, typer.Option(
    "--grad-sync", help="every or boundary: where the implementation lets you choose (DDP and FSDP no_sync() "
                        "/ set_requires_gradient_sync(False)), reduce gradients every micro-batch or only in "
                        "the last.")]
TableTp = Annotated[int, typer.Option("--tp", help="Tensor-parallel degree (the data-parallel group is "
                                                   "n/(tp·pp)).")]
TablePp = Annotated[int, typer.Option("--pp", help="Pipeline-parallel degree.")]
TableHsdpShardSize = Annotated[int, typer.Option(
    "--hsdp-shard-size", help="fsdp-hybrid: ranks in one shard group H [default: the data-parallel group's "
                              "GPUs per node].")]
TableReuseDistance = Annotated[float, typer.Option(
    "--reuse-distance", help="deepspeed-zero3: stage3_max_reuse_distance, parameter elements [default: "
                             "DeepSpeed's 1e9].")]
TableK = Annotated[float, typer.Option("--k", help="Optimizer-state bytes per parameter (12: mixed-precision "
                                                   "Adam).")]
TableSchemes = Annotated[str, typer.Option("--schemes",
                                           help="Comma-separated scheme names [default: all].")]
IntraAlphaUs = Annotated[float, typer.Option("--intra-alpha-us", help="Override: intra-node latency, µs.")]
IntraBwGBps = Annotated[float, typer.Option("--intra-bw-GBps",
                                            help="Override: one GPU's intra-node bandwidth, GB/s.")]
InterAlphaUs = Annotated[float, typer.Option("--inter-alpha-us", help="Override: inter-node latency, µs.")]
InterBwGBps = Annotated[float, typer.Option("--inter-bw-GBps",
                                            help="Override: one node's inter-node bandwidth, GB/s.")]
TableGpuMemory = Annotated[str, typer.Option(
    "--gpu-memory", help="Memory of one GPU (80GB, 80GiB): adds a 'fits' column [default: the topology's, if "
                         "it names one].")]
TableSort = Annotated[str, typer.Option("--sort", help="time: the schemes that fit first, fastest first "
                                                       "(ring time); memory: least memory first.")]

# --- feasibility ---------------------------------------------------------------------------------------

SimN = Annotated[int, typer.Option("--n", help="Simulated ranks (data-parallel degree N).")]
SimSteps = Annotated[int, typer.Option("--steps",
                                       help="Adam steps to simulate (0: compare nothing).")]
SimSeed = Annotated[int, typer.Option("--seed", help="Seed of the weights and of every micro-batch.")]
SimMicroBatches = Annotated[int, typer.Option(
    "--micro-batches", help="Micro-batches per optimizer step (gradient accumulation): each scheme reduces "
                            "every micro-batch or once per step as its implementation does.")]
SimSchemes = Annotated[list[str] | None, typer.Option(
    "--schemes", help="Schemes to simulate (repeat or comma-separate); default: all.")]
SimGpusPerNode = Annotated[int | None, typer.Option(
    "--gpus-per-node", help="Ranks per node: of the simulation (for fsdp-hybrid and zeropp; default 2 if N "
                            "is even) and of the cluster the plan is priced on (default: the topology's).")]
PlanPsi = Annotated[str | None, typer.Option(
    "--psi", help="Parameters of the model the plan is priced for: 7.5e9, 70B [default: 7.5e9].")]
PlanN = Annotated[int | None, typer.Option(
    "--plan-n", help="GPUs of the run the plan is priced for: its data-parallel degree N when --plan-tp and "
                     "--plan-pp are 1, else N = plan-n/(tp·pp) [default: --n].")]
PlanTp = Annotated[int, typer.Option(
    "--plan-tp", help="Tensor-parallel degree of that run: the plan is of its data-parallel group, "
                      "Ψ/(tp·pp) a rank.")]
PlanPp = Annotated[int, typer.Option("--plan-pp", help="Pipeline-parallel degree of that run.")]
PlanMicroBatches = Annotated[int | None, typer.Option(
    "--plan-micro-batches", help="Micro-batches per optimizer step of the run the plan is priced for: each "
                                 "scheme reduces every micro-batch or once per step as its implementation "
                                 "does [default: --micro-batches].")]
PlanTopology = Annotated[str, typer.Option(
    "--topology", help="Cluster the plan is priced on: a preset (dgx-a100, dgx-h100, dgx-h200, dgx-b200, "
                       "gcp-a3-mega, pcie-gen4, ethernet-100g) or a .toml file; its in-network reduction "
                       "(nvls, sharp) is priced where it has one.")]
PlanDtype = Annotated[str, typer.Option("--dtype",
                                        help="Element type on the wire for the plan. " + _DTYPE_HELP)]
PlanParamDtype = Annotated[str | None, typer.Option(
    "--param-dtype", help="The plan's parameter-side collectives' dtype (all-gather, broadcast of "
                          "parameters), e.g. FSDP2 param_dtype [default: --dtype].")]
PlanGradDtype = Annotated[str | None, typer.Option(
    "--grad-dtype", help="The plan's gradient-side collectives' dtype (all-reduce, reduce-scatter, reduce), "
                         "e.g. fp32 where gradients are reduced in fp32 (FSDP2 reduce_dtype, Megatron "
                         "grad_reduce_in_fp32) [default: --dtype].")]
PlanFormat = Annotated[str, typer.Option("--format", help="table or json.")]
#: ``--time-model``'s help, shared by feasibility and report
TIME_MODEL_HELP = ("How the implementation plan's time is priced: nccl (NCCL's own cost model and the "
                   "algorithms it picks, RCCL's on AMD GPUs, as table's t NCCL) or ring (the α-β ring "
                   "model) [default: nccl where the topology gives what NCCL's model needs, else ring].")
PlanTimeModel = Annotated[str | None, typer.Option("--time-model", help=TIME_MODEL_HELP)]
PlanNcclVersion = Annotated[str | None, typer.Option(
    "--nccl-version", help="NCCL version whose cost model prices the plan (RCCL's on an AMD topology) "
                           "[default: the latest].")]
PlanNcclAlgo = Annotated[str | None, typer.Option(
    "--nccl-algo", envvar="NCCL_ALGO", help="NCCL_ALGO list restricting NCCL's algorithms in the plan.")]
PlanNcclProto = Annotated[str | None, typer.Option(
    "--nccl-proto", envvar="NCCL_PROTO", help="NCCL_PROTO list restricting NCCL's protocols in the plan.")]

# --- report --------------------------------------------------------------------------------------------

ReportOutput = Annotated[str, typer.Option("-o", "--output", "--out", help="PDF to write.")]
ReportPsi = Annotated[str | None, typer.Option("--psi", help="Parameters: 7.5e9, 7.5B, 175B, 1T "
                                               "[default: 7.5e9].")]
ReportN = Annotated[int, typer.Option(
    "--n", help="Data-parallel ranks N of the cluster (with --tp / --pp: the run's GPUs).")]
ReportGpusPerNode = Annotated[int | None, typer.Option(
    "--gpus-per-node", help="GPUs per node [default: the topology's].")]
ReportTopology = Annotated[str, typer.Option("--topology", help=_TOPOLOGY_HELP)]
ReportDtype = Annotated[str, typer.Option("--dtype", help=_DTYPE_HELP)]
ReportTrace = Annotated[list[str] | None, typer.Option(
    "--trace", help="A trace file or a directory of one run (repeat for several runs; - or a pipe is "
                    "read as check reads one); default: the real traces bundled with zerocalc.")]
ReportModel = Annotated[str | None, typer.Option("--model", help=_MODEL_HELP)]
ReportGpuMemory = Annotated[str | None, typer.Option(
    "--gpu-memory", help="Memory of one GPU (80GB, 141e9): the summary flags model states above it "
                         "[default: the topology's, where it gives one].")]
ReportNcclTuner = Annotated[str | None, typer.Option(
    "--nccl-tuner", help=_TUNER_HELP + " The schemes are then also priced with NCCL's cost model, by "
                         "itself and under these rules.")]
ReportOfiTuner = Annotated[str | None, typer.Option(
    "--ofi-tuner", help=_OFI_HELP + " The schemes are then also priced with NCCL's cost model, by itself "
                        "and under the plugin.")]
ReportTimeModel = Annotated[str | None, typer.Option("--time-model", help=TIME_MODEL_HELP)]
ReportBucket = Annotated[str | None, typer.Option("--bucket", help=BUCKET_HELP)]
ReportParamDtype = Annotated[str | None, typer.Option(
    "--param-dtype", help="Dtype of the parameter-side collectives (all-gather, broadcast of "
                          "parameters), e.g. FSDP2 param_dtype: the volume table, page 1 and the plan "
                          "[default: --dtype].")]
ReportGradDtype = Annotated[str | None, typer.Option(
    "--grad-dtype", help="Dtype of the gradient-side collectives (all-reduce, reduce-scatter, "
                         "reduce), e.g. fp32 (FSDP2 reduce_dtype, Megatron grad_reduce_in_fp32): the "
                         "volume table, page 1 and the plan [default: --dtype].")]
ReportMicroBatches = Annotated[int, typer.Option(
    "--micro-batches", help="Micro-batches per optimizer step (gradient accumulation): the volume table, "
                            "the simulation, the verdict and the plan run each scheme's collectives "
                            "every micro-batch or once per step as its implementation does.")]
ReportTp = Annotated[int, typer.Option(
    "--tp", help="Tensor-parallel degree of the run: --n is then its GPUs, and the volume table, the "
                 "verdict and the plan are of its data-parallel group, N = n/(tp·pp) ranks holding "
                 "Ψ/(tp·pp) each, as table --tp lays it out.")]
ReportPp = Annotated[int, typer.Option("--pp", help="Pipeline-parallel degree of the run (as --tp).")]
