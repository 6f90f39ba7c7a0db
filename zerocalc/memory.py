"""Model-state bytes per rank for every scheme (ZeRO §3.1, §5), and DeepSpeed's estimators.

Model states are parameters (``b_param`` bytes each), gradients (``b_grad``) and optimizer
state (K bytes per parameter: 12 for mixed-precision Adam). Activations, buffers and
fragmentation are not included. With b_param = b_grad = 2 (ZeRO §5, Table 1):

* data parallel (2 + 2 + K)Ψ; P_os 4Ψ + KΨ/N; P_os+g 2Ψ + (2 + K)Ψ/N; P_os+g+p (4 + K)Ψ/N.

Under tensor and pipeline parallelism Ψ is the parameters of one data-parallel group
(total/(tp·pp)), which is what one GPU's shards are cut from. Under FSDP's
``set_requires_gradient_sync(False)`` / ``no_sync()`` (``grad_sync="boundary"``) the gradients of
the micro-batches accumulate unsharded, so the gradient term is whole.
"""

from __future__ import annotations

import sympy

from zerocalc import symbols as S
from zerocalc.schemes import GradSync, as_grad_sync, get_scheme

_P, _Gr, _O = S.b_param * S.Psi, S.b_grad * S.Psi, S.K * S.Psi


def _sharded(params, grads, opt, over=S.N) -> sympy.Expr:
    """Bytes with the named states divided over ``over`` ranks and the rest replicated."""
    return (_P / over if params else _P) + (_Gr / over if grads else _Gr) + (_O / over if opt else _O)


_FORMULAS = {
    # ZeRO (arXiv 1910.02054) §3.1 baseline
    "dp": _sharded(False, False, False),
    # ZeRO §5.1 P_os
    "zero1": _sharded(False, False, True),
    # ZeRO §5.2 P_os+g
    "zero2": _sharded(False, True, True),
    # ZeRO §5.3 P_os+g+p
    "zero3": _sharded(True, True, True),
    # DeepSpeed #4582: gradients kept only for the local optimizer shard, as P_os+g
    "colocated": _sharded(False, True, True),
    # deepspeed/runtime/zero/stage_1_and_2.py: gradient hooks (which reduce a bucket and keep only
    # the rank's partition) are attached only for partitioned gradients (stage 2) or overlap_comm;
    # ZeRO-1 otherwise keeps the whole gradient until the boundary: P_os
    "deepspeed-zero1": _sharded(False, False, True),
    # ZeRO-2 keeps only the gradient partition between buckets: P_os+g model states
    "deepspeed-zero2": _sharded(False, True, True),
    "deepspeed-zero2-reduce": _sharded(False, True, True),
    # stage3.py: parameters, gradients and optimizer states partitioned (P_os+g+p); the gathered
    # working copies (≤ stage3_max_live_parameters) are not model states
    "deepspeed-zero3": _sharded(True, True, True),
    # ZeroRedundancyOptimizer shards the optimizer state only; DDP keeps all gradients
    "torch-zero1": _sharded(False, False, True),
    # FSDP (arXiv 2304.11277): FULL_SHARD shards all three; SHARD_GRAD_OP keeps the gathered
    # parameters from forward to backward, so its peak holds full parameters
    "fsdp-full-shard": _sharded(True, True, True),
    "fsdp-shard-grad-op": _sharded(False, True, True),
    # HYBRID_SHARD shards inside its shard group of H only (a node by default)
    "fsdp-hybrid": _sharded(True, True, True, over=S.H),
    # ZeRO++ §3.2 (hpZ): ZeRO-3 plus a secondary copy of the parameters sharded inside the node
    "zeropp": _sharded(True, True, True) + _P / S.G,
}


#: FSDP keeps the micro-batches' gradients unsharded when it does not sync every micro-batch
#: (FSDP2 set_requires_gradient_sync(False), FSDP1 no_sync()): the sharded gradient term is whole.
_UNSHARDED_GRADS_AT_BOUNDARY = {
    "fsdp-full-shard": _sharded(True, False, True),
    "fsdp-shard-grad-op": _sharded(False, False, True),
    "fsdp-hybrid": _sharded(True, False, True, over=S.H),
}


def model_state_bytes(scheme: str, grad_sync: GradSync | str = GradSync.EVERY) -> sympy.Expr:
    """Model-state bytes per rank of ``scheme`` as an expression in Ψ, N, G, H, b_param, b_grad, K.

    An alias (``deepspeed-zero12``) has the memory of the scheme it stands for.
    """
    s = get_scheme(scheme)
    name = s.alias_of or s.name
    if as_grad_sync(grad_sync) is GradSync.BOUNDARY and name in _UNSHARDED_GRADS_AT_BOUNDARY:
        return _UNSHARDED_GRADS_AT_BOUNDARY[name]
    return _FORMULAS[name]


def deepspeed_estimate_zero2_model_states_mem_needs(
    total_params: int,
    num_gpus_per_node: int = 1,
    num_nodes: int = 1,
    cpu_offload: bool = True,
    additional_buffer_factor: float = 1.5,
    *,
    before_pr_5099: bool = False,
) -> tuple[int, int]:
    """DeepSpeed's ``estimate_zero2_model_states_mem_needs`` (deepspeed/runtime/zero/stage_1_and_2.py).

    Returns ``(cpu_bytes, gpu_bytes)`` like DeepSpeed. Without offload the GPU figure is
    2Ψ + 18Ψ/N in current releases and 4Ψ + 16Ψ/N before PR #5099 (``before_pr_5099``).
    DeepSpeed prints these divided by 2^30 and labelled "GB".
    """
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        if before_pr_5099:
            gpu_mem = 4 * total_params + int(16 * total_params / total_gpus)
        else:
            gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def deepspeed_estimate_zero3_model_states_mem_needs(
    total_params: int,
    largest_layer_params: int,
    num_gpus_per_node: int = 1,
    num_nodes: int = 1,
    cpu_offload: bool = True,
    cpu_offload_params: bool = True,
    zero_init: bool = True,
    additional_buffer_factor: float = 1.5,
) -> tuple[int, int, int]:
    """DeepSpeed's ``estimate_zero3_model_states_mem_needs`` (deepspeed/runtime/zero/stage3.py).

    Returns ``(cpu_bytes, gpu_bytes, largest_layer_bytes)`` like DeepSpeed; without offload
    GPU = 4·L + 18Ψ/N with L the largest layer's parameter count.
    """
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    abf = additional_buffer_factor
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            if zero_init:
                cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 18 * gpus_factor) * abf
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            if zero_init:
                cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 16 * gpus_factor) * abf
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
        else:
            cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), int(largest_layer_memory)
