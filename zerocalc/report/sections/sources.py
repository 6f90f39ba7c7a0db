"""Section 8: the sources cited, numbered."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zerocalc.report.sections import title

if TYPE_CHECKING:
    from zerocalc.report.config import ReportData
    from zerocalc.report.layout import Writer


_SOURCES = [
    "DeepSpeed issue #4582, \"Direct Correspondence between Gradient and Optimizer States to Reduce "
    "Communication\", github.com/deepspeedai/DeepSpeed/issues/4582 (2023-10-30).",
    "S. Rajbhandari, J. Rasley, O. Ruwase, Y. He. ZeRO: Memory Optimizations Toward Training Trillion "
    "Parameter Models. SC20, arXiv:1910.02054. §2.1, §3.1, §5 (memory, Table 1), §7 (communication).",
    "P. Patarasuk, X. Yuan. Bandwidth optimal all-reduce algorithms for clusters of workstations. "
    "J. Parallel Distrib. Comput. 69(2), 2009: the 2(N−1)/N lower bound for all-reduce.",
    "R. Thakur, R. Rabenseifner, W. Gropp. Optimization of Collective Communication Operations in MPICH. "
    "IJHPCA 19(1), 2005: α-β-γ costs of ring, recursive halving/doubling and binomial-tree collectives.",
    "R. W. Hockney. The communication challenge for MPP: Intel Paragon and Meiko CS-2. Parallel "
    "Computing 20(3), 1994: the α-β model.",
    "DeepSpeed source, deepspeed/runtime/zero/stage_1_and_2.py (use_multi_rank_bucket_allreduce) and "
    "stage3.py; DeepSpeed issues #5758 and #6463, PR #7440: ZeRO-1/2 reduce gradients with all-reduce; "
    "deepspeed/runtime/zero/config.py: stage3_max_reuse_distance keeps gathered parameters for reuse.",
    "PyTorch ZeroRedundancyOptimizer (torch.distributed.optim) and pytorch issue #69591: DDP all-reduce "
    "plus one broadcast per parameter shard.",
    "Y. Zhao et al. PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel. VLDB 2023, "
    "arXiv:2304.11277: FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD.",
    "G. Wang et al. ZeRO++: Extremely Efficient Collective Communication for Giant Model Training. "
    "arXiv:2306.10209: qwZ, hpZ, qgZ.",
    "NVIDIA nccl-tests, doc/PERFORMANCE.md: algorithm and bus bandwidth; NCCL src/graph/tuning.cc.",
    "NVIDIA NCCL v2.19.4-1, v2.26.2-1 and v2.30.7-1: src/graph/tuning.cc (ncclTopoTuneModel, "
    "ncclTopoGetAlgoTime), "
    "src/graph/search.cc (speed arrays, channel duplication), src/graph/topo.h and topo.cc (NVLink, PCIe "
    "and NIC bandwidths), src/enqueue.cc (the algorithm/protocol choice); NVIDIA DGX A100, DGX H100, DGX "
    "H200 and DGX B200 datasheets; Google Cloud A3 Mega machine type; GoogleCloudPlatform "
    "nccl-env-profile.sh for GPUDirect-TCPXO (NCCL_TUNER_PLUGIN).",
    "nccl-tests sweeps published in dstackai/dstack examples/clusters (Nebius H100, Lambda B200, GCP A3 "
    "Mega), NVIDIA/nccl-tests issue 309 (two Dell XE9680, HGX H100 with 8× 400 Gb/s InfiniBand, NCCL "
    "2.26.2) and oracle-japan/ocitutorials spinup-gpu-cluster.md (OCI BM.GPU4.8, 8× A100-SXM4-40GB).",
    "DeepSpeed estimate_zero2_model_states_mem_needs / estimate_zero3_model_states_mem_needs "
    "(deepspeed/runtime/zero/stage_1_and_2.py, stage3.py).",
    "Real traces: HolisticTraceAnalysis tests/data (PyTorch DDP ResNet-50 on A100, NCCL 2.17.1); a "
    "DeepSpeed 0.19.8 ZeRO-3 run on 4 ranks over gloo; an all_reduce_perf sweep on 16 H100 GPUs (2 nodes).",
]


def draw(w: Writer, data: ReportData) -> None:
    w.heading(title("sources"))
    w.bullets([f"[{i}] {s}" for i, s in enumerate(_SOURCES, start=1)], marker="")
