"""Make the real-run profiler traces in this directory (one case per run).

Usage (CPU, gloo backend; torch and DeepSpeed live in their own virtualenv, they are
not dependencies of zerocalc)::

    torchrun --nproc_per_node 4 make_traces.py CASE OUTDIR

writes ``OUTDIR/rank{r}.json.gz``: the PyTorch profiler's Chrome trace of rank r, CPU
activities, ``record_shapes=True``, schedule wait 0 / warm-up 1 / active ``steps``, and
exactly one ``ProfilerStep#k`` per OPTIMIZER step (``prof.step()`` runs after
``optimizer.step()``; the micro-batches of gradient accumulation all fall inside it), but in
the ``*-step-per-micro-batch`` cases: one per micro-batch, as DeepSpeed's loop
(``engine.backward(loss); engine.step(); prof.step()``) puts it.

Every case trains the same tiny MLP (``LAYERS``; Ψ = 71,104 parameters) on random data
with fixed seeds, so each layer's collectives can be told apart by their sizes.
``python make_traces.py --list`` prints the cases; each run also writes ``OUTDIR/run.json``
(what ran: versions, model, dtypes, groups, micro-batches, profiler schedule).
"""

import argparse
import contextlib
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

# Linear layer sizes: (in, out). Every out size is a multiple of 4, so a shard over 2 or
# 4 ranks needs no padding; the three layers have distinct sizes.
LAYERS = [(128, 192), (192, 160), (160, 96)]
PSI = sum(i * o + o for i, o in LAYERS)  # 71,104
MICRO_BATCH = 8  # samples per micro-batch per rank
LR = 1e-3


class MLP(nn.Module):
    """Linear(128,192) - ReLU - Linear(192,160) - ReLU - Linear(160,96), or the Linear ``layers`` given; the
    layers whose indices are in ``checkpointed`` run under reentrant activation checkpointing
    (``torch.utils.checkpoint.checkpoint(..., use_reentrant=True)``: recomputed in the backward, which runs a
    backward of its own inside the checkpoint's)."""

    def __init__(self, layers=LAYERS, checkpointed=()):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(i, o) for i, o in layers)
        self.checkpointed = frozenset(checkpointed)

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        for k, layer in enumerate(self.layers):
            x = checkpoint(layer, x, use_reentrant=True) if k in self.checkpointed else layer(x)
            if k < len(self.layers) - 1:
                x = torch.relu(x)
        return x


def make_model(dtype=torch.float32, layers=LAYERS, checkpointed=()):
    torch.manual_seed(0)  # the same initial weights on every rank
    return MLP(layers, checkpointed).to(dtype)


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` (``base``) beside a trained low-rank update of rank ``r``, as LoRA (Hu et al.,
    arXiv 2106.09685) and PEFT's ``lora.Linear`` put them: ``base(x) + lora_B(lora_A(x))``, ``lora_A`` in → r
    and ``lora_B`` r → out, without biases."""

    def __init__(self, base, r):
        super().__init__()
        self.base = base
        base.requires_grad_(False)
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x))


def lora_model(r, on=None):
    """:func:`make_model` with each Linear numbered in ``on`` (default: every one) a :class:`LoRALinear` of
    rank ``r`` (the same base weights), the others frozen whole."""
    model = make_model()
    for i, layer in enumerate(model.layers):
        if on is None or i in on:
            model.layers[i] = LoRALinear(layer, r)
        else:
            layer.requires_grad_(False)
    return model


def batch(rank, step, micro, dtype=torch.float32):
    """The micro-batch `micro` of optimizer step `step` on `rank` (fixed seed)."""
    g = torch.Generator().manual_seed(10_000 + 1_000 * rank + 10 * step + micro)
    x = torch.randn(MICRO_BATCH, LAYERS[0][0], generator=g).to(dtype)
    y = torch.randn(MICRO_BATCH, LAYERS[-1][1], generator=g).to(dtype)
    return x, y


def loss_fn(out, y):
    return nn.functional.mse_loss(out.float(), y.float())


def run_profiled(outdir, steps, train_step, warmup=1, record_shapes=True):
    """Warm-up step (none where ``warmup`` is 0: the first step is profiled) + `steps` profiled optimizer
    steps; train_step(step) runs one optimizer step. ``record_shapes`` False: the profiler's default,
    which records no sizes."""
    rank = dist.get_rank()

    def save(prof):
        prof.export_chrome_trace(os.path.join(outdir, f"rank{rank}.json.gz"))

    sched = schedule(wait=0, warmup=warmup, active=steps, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes, schedule=sched,
                 on_trace_ready=save) as prof:
        for step in range(warmup + steps):
            train_step(step)
            prof.step()  # one ProfilerStep per optimizer step


def run_profiled_without_steps(outdir, steps, train_step, warmup=1):
    """``warmup`` steps unprofiled, then `steps` optimizer steps inside ``torch.profiler.profile`` with no
    schedule and no ``prof.step()``, as a quick profile of a few iterations is often taken: the trace marks
    no ``ProfilerStep``; its optimizer's steps are annotated (``Optimizer.step#Adam.step``) as always."""
    rank = dist.get_rank()
    for step in range(warmup):
        train_step(step)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for step in range(warmup, warmup + steps):
            train_step(step)
    prof.export_chrome_trace(os.path.join(outdir, f"rank{rank}.json.gz"))


# --- plain PyTorch cases --------------------------------------------------------------------------


def ddp_loop(model, opt, k, no_sync_first, forward=None):
    """k micro-batches per optimizer step; no_sync() on the first k-1 when no_sync_first; ``forward``: what
    runs the model (``torch.compile(model)``; default the DDP module itself)."""
    rank = dist.get_rank()
    dtype = next(model.parameters()).dtype
    forward = model if forward is None else forward

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        for m in range(k):
            x, y = batch(rank, step, m, dtype)
            ctx = model.no_sync() if (no_sync_first and m < k - 1) else contextlib.nullcontext()
            with ctx:
                loss_fn(forward(x), y).div(k).backward()
        opt.step()

    return train_step


def case_ddp(outdir, *, k=1, no_sync=False, dtype=torch.float32, group=None, steps=3, layers=LAYERS,
             warmup=1, record_shapes=True, checkpointed=(), compiled=False, **ddp_options):
    """DDP (``ddp_options``: DistributedDataParallel's own, e.g. ``find_unused_parameters``), ``k``
    micro-batches a step (:func:`ddp_loop`), ``steps`` profiled after ``warmup`` steps; the layers
    ``checkpointed`` under reentrant activation checkpointing (:class:`MLP`); ``compiled``: the DDP module
    run through ``torch.compile`` (Inductor on CPU)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(make_model(dtype, layers, checkpointed), process_group=group, **ddp_options)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    forward = torch.compile(model) if compiled else None
    run_profiled(outdir, steps, ddp_loop(model, opt, k, no_sync, forward), warmup, record_shapes)


def case_ddp_step_per_micro_batch(outdir, k=4, steps=3, no_sync=True):
    """DDP (fp32), ``k`` micro-batches an optimizer step, the first k-1 inside ``no_sync()`` (where
    ``no_sync``; else each all-reduces its gradients), and
    ``prof.step()`` after every micro-batch (the optimizer steps after the k-th): one ProfilerStep a
    micro-batch. The profiler's warm-up is the whole first optimizer step (k micro-batches), then k x
    ``steps`` micro-batches are profiled."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(make_model())
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    rank = dist.get_rank()

    def micro_batch(i):
        step, m = divmod(i, k)
        x, y = batch(rank, step, m)
        with model.no_sync() if no_sync and m < k - 1 else contextlib.nullcontext():
            loss_fn(model(x), y).div(k).backward()
        if m == k - 1:
            opt.step()
            opt.zero_grad(set_to_none=True)

    run_profiled(outdir, k * steps, micro_batch, warmup=k)


def case_ddp_profiler_windows(outdir, windows=2, active=2):
    """DDP (fp32, one micro-batch) profiled by a schedule that repeats: wait 1 / warm-up 1 / active
    ``active``, ``windows`` times, each window written by ``tensorboard_trace_handler`` to a file of its
    own (``rank{r}.{time}.pt.trace.json.gz``), as the PyTorch profiler recipe does."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import tensorboard_trace_handler

    model = DDP(make_model())
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    train = ddp_loop(model, opt, 1, False)
    sched = schedule(wait=1, warmup=1, active=active, repeat=windows)
    handler = tensorboard_trace_handler(outdir, worker_name=f"rank{dist.get_rank()}", use_gzip=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=sched,
                 on_trace_ready=handler) as prof:
        for step in range(windows * (2 + active)):
            train(step)
            prof.step()


def case_ddp_loss_gather(outdir):
    """DDP on every rank of the world, one micro-batch, and after each optimizer step the loss gathered from
    every rank to be logged, as Hugging Face Trainer's ``_nested_gather`` and Accelerate's ``gather`` do
    (``all_gather_into_tensor`` of one element a rank): on 16 ranks its output holds 16 elements."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(make_model())
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    rank, world = dist.get_rank(), dist.get_world_size()

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        x, y = batch(rank, step, 0)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses = torch.empty(world)
        dist.all_gather_into_tensor(losses, loss.detach().reshape(1))

    run_profiled(outdir, 3, train_step)


def case_ddp_subgroup(outdir):
    # Data-parallel groups of 2 inside a world of 4, as under tensor parallelism of 2:
    # DP groups {0,2} and {1,3} (the TP groups would be {0,1} and {2,3}).
    dp_group, _ = dist.new_subgroups_by_enumeration([[0, 2], [1, 3]])
    case_ddp(outdir, group=dp_group)


def case_ddp_zero_ro_fp16_hook(outdir):
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import fp16_compress_hook
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(make_model())
    model.register_comm_hook(state=None, hook=fp16_compress_hook)
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=LR)
    run_profiled(outdir, 3, ddp_loop(model, opt, 1, False))


#: What PowerSGD's hook at rank 1 reduces a step of the MLP: the biases whole (compressing them would not save
#: 2×), each weight's factors P (out × 1) and Q (in × 1).
POWERSGD_RANK1_REDUCED = {"uncompressed (biases)": sum(o for _, o in LAYERS),
                          "P factors": sum(o for _, o in LAYERS), "Q factors": sum(i for i, _ in LAYERS)}


def case_ddp_powersgd(outdir, rank=1, start=2, k=1):
    """DDP with PyTorch's PowerSGD comm hook (``powerSGD_hook``, rank ``rank``, error feedback and warm start
    on, as its defaults): from iteration ``start`` on, each bucket all-reduces the tensors it does not
    compress (the biases: compressing them would not save ``min_compression_rate`` = 2×), then the P
    factors, then the Q factors; before it, the bucket whole. ``start`` warm-up steps run unprofiled, so
    every profiled step is compressed. ``k`` micro-batches a step, the first k-1 in ``no_sync()``."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(make_model())
    state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=rank,
                                   start_powerSGD_iter=start)
    model.register_comm_hook(state, powersgd.powerSGD_hook)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    run_profiled(outdir, 3, ddp_loop(model, opt, k, True), warmup=start)


def case_ddp_post_local_sgd(outdir, start=2, period=2, subgroup_size=2, steps=4, local=True):
    """Post-local SGD: DDP with ``post_localSGD_hook`` (``PostLocalSGDState(subgroup=...,
    start_localSGD_iter=start)``: from iteration ``start`` on, the gradients all-reduced within subgroups of
    ``subgroup_size`` ranks only) and a ``PeriodicModelAverager(period, warmup_steps=start)`` that
    all-reduces the flattened parameters over the world after the optimizer's step every ``period`` steps.
    The ``start`` steps before run as the profiler's warm-up. ``local`` False: no hook (the gradients
    all-reduced over the world), the averager alone."""
    from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import (
        PostLocalSGDState,
        post_localSGD_hook,
    )
    from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(make_model())
    if local:
        subgroup, _ = dist.new_subgroups(group_size=subgroup_size)
        state = PostLocalSGDState(process_group=None, subgroup=subgroup, start_localSGD_iter=start)
        model.register_comm_hook(state, post_localSGD_hook)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    averager = PeriodicModelAverager(period=period, warmup_steps=start)
    train = ddp_loop(model, opt, 1, False)

    def train_step(step):
        train(step)
        averager.average_parameters(model.parameters())

    run_profiled(outdir, steps, train_step, warmup=start)


def freeze(model, frozen=()):
    """``model`` with the parameters of its layers numbered in ``frozen`` set not to train
    (``requires_grad_(False)``, as a frozen backbone or LoRA's base weights are)."""
    for i in frozen:
        for p in model.layers[i].parameters():
            p.requires_grad_(False)
    return model


def fsdp2_model(mesh, mp_policy=None, reshard=True, units=None, layers=LAYERS, frozen=(), lora=0,
                lora_on=None):
    """FSDP2 ``fully_shard`` on each Linear (on the first ``units`` alone where given: the others' parameters
    stay with the root's) and on the root; ``reshard`` None leaves reshard_after_forward at its default; the
    layers numbered in ``frozen`` frozen (:func:`freeze`); with ``lora``, :func:`lora_model` of that rank
    on the layers ``lora_on``, each :class:`LoRALinear` one unit with its adapters."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model = lora_model(lora, lora_on) if lora else freeze(make_model(layers=layers), frozen)
    kw = {"mesh": mesh, "mp_policy": mp_policy or MixedPrecisionPolicy()}
    if reshard is not None:
        kw["reshard_after_forward"] = reshard
    for layer in model.layers[:units]:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    return model


def fsdp2_loop(model, opt, k, sync_every, all_reduce_every=True, max_norm=None, data_rank=None,
               keep_after_backward=False, log_loss=False):
    """k micro-batches a step; gradients synchronised in the last alone unless ``sync_every``; under HSDP,
    the replicate all-reduce in the last alone unless ``all_reduce_every`` (reduce-scatters in every one);
    what a backward gathered kept for the next micro-batch, but after the last, where
    ``keep_after_backward`` (``set_reshard_after_backward(False)`` on the others);
    the gradients clipped to ``max_norm`` before the optimizer step where given (torchtitan's default 1.0:
    ``torch.nn.utils.clip_grad_norm_`` on the sharded gradients). Each rank trains on the batches of
    ``data_rank`` (default its own rank; its data-parallel place where tensor-parallel ranks share them).
    ``log_loss``: after the optimizer step, the last micro-batch's loss all-reduced over the world (one
    element), as a loop that logs the mean loss does."""
    rank = dist.get_rank() if data_rank is None else data_rank

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        for m in range(k):
            if not sync_every:
                model.set_requires_gradient_sync(m == k - 1)
            if not all_reduce_every:
                model.set_requires_all_reduce(m == k - 1)
            if keep_after_backward:
                model.set_reshard_after_backward(m == k - 1)
            x, y = batch(rank, step, m)
            loss = loss_fn(model(x), y).div(k)
            loss.backward()
        if max_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        if log_loss:
            dist.all_reduce(loss.detach())

    return train_step


def case_fsdp2(outdir, *, mesh_shape=(4,), mesh_names=("shard",), mp_policy=None, k=1,
               sync_every=True, steps=3, reshard=True, all_reduce_every=True, units=None, max_norm=None,
               layers=LAYERS, keep_after_backward=False, without_steps=False, frozen=(), lora=0,
               lora_on=None):
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", mesh_shape, mesh_dim_names=mesh_names)
    model = fsdp2_model(mesh, mp_policy, reshard, units, layers, frozen, lora, lora_on)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loop = fsdp2_loop(model, opt, k, sync_every, all_reduce_every, max_norm,
                      keep_after_backward=keep_after_backward)
    (run_profiled_without_steps if without_steps else run_profiled)(outdir, steps, loop)



def case_fsdp2_checkpoint(outdir, *, every=2, steps=6):
    """FSDP2 (``case_fsdp2``'s model and loop, one micro-batch) saving a checkpoint with
    ``torch.distributed.checkpoint.save`` after every ``every``-th profiled optimizer step, inside its
    ``ProfilerStep`` (before ``prof.step()``), as a training loop with a short checkpoint interval does; the
    checkpoint's files are written under OUTDIR/ckpt and removed after the run."""
    import shutil

    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("shard",))
    model = fsdp2_model(mesh)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    train = fsdp2_loop(model, opt, 1, True)
    where = os.path.join(outdir, "ckpt")

    def train_step(step):
        train(step)
        if step > 0 and step % every == 0:
            dcp.save({"model": model.state_dict()}, checkpoint_id=os.path.join(where, str(step)))

    run_profiled(outdir, steps, train_step)
    dist.barrier()
    if dist.get_rank() == 0:
        shutil.rmtree(where)


def fsdp1_model(strategy, mixed=False, groups=None, units=None, frozen=(), checkpointed=()):
    """FSDP1 (``FullyShardedDataParallel``): one unit per Linear (``ModuleWrapPolicy``; the first ``units``
    alone where given, by ``lambda_auto_wrap_policy``: the others' parameters stay in the root unit) and the
    root, each unit's weight and bias one flat parameter; ``groups`` = (shard group, replicate group) for
    HYBRID_SHARD; the layers numbered in ``frozen`` frozen (:func:`freeze`; ``use_orig_params=True`` then,
    as FSDP1 needs to hold frozen and trained parameters in one model); those in ``checkpointed`` under
    reentrant activation checkpointing (:class:`MLP`: ``checkpoint(FSDP(layer))``)."""
    import functools

    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy, lambda_auto_wrap_policy

    mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else None
    model = freeze(make_model(checkpointed=checkpointed), frozen)
    policy = ModuleWrapPolicy({nn.Linear})
    if units is not None:
        own = set(model.layers[:units])
        policy = functools.partial(lambda_auto_wrap_policy, lambda_fn=lambda module: module in own)
    return FSDP(model, auto_wrap_policy=policy, device_id=torch.device("cpu"),
                sharding_strategy=getattr(ShardingStrategy, strategy), mixed_precision=mp,
                process_group=groups, use_orig_params=bool(frozen))


def case_fsdp1(outdir, strategy="FULL_SHARD", *, k=1, no_sync=False, mixed=False, steps=3, units=None,
               evaluate_every=None, frozen=(), checkpointed=()):
    """FSDP1 (:func:`fsdp1_model`) in :func:`ddp_loop`; with ``evaluate_every``, :func:`evaluating`."""
    groups = None
    if "HYBRID_SHARD" in strategy:  # shard over {0, 1} and {2, 3}, replicate over {0, 2} and {1, 3}
        shard = [dist.new_group(r) for r in ([0, 1], [2, 3])]
        replicate = [dist.new_group(r) for r in ([0, 2], [1, 3])]
        rank = dist.get_rank()
        groups = (shard[rank // 2], replicate[rank % 2])
    model = fsdp1_model(strategy, mixed, groups, units, frozen, checkpointed)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    train_step = ddp_loop(model, opt, k, no_sync)
    if evaluate_every:
        train_step = evaluating(model, train_step, evaluate_every)
    run_profiled(outdir, steps, train_step)


def case_ddp_eval_only(outdir):
    """DDP's model evaluated, no training: each profiled step one batch's forward under ``torch.no_grad()``,
    then its loss and a metric (a 1-element count) each all-reduced, as an evaluation loop that averages
    them over ranks does. One ``ProfilerStep`` per batch."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(make_model())
    rank = dist.get_rank()

    def eval_step(step):
        with torch.no_grad():
            x, y = batch(rank, step, 0)
            out = model(x)
            loss = loss_fn(out, y).reshape(1)
            close = (out - y).abs().lt(1.0).float().sum().reshape(1)
            dist.all_reduce(loss)
            dist.all_reduce(close)

    run_profiled(outdir, 3, eval_step)


def case_ddp_eval_own_steps(outdir, cycles=2):
    """DDP (fp32, one micro-batch) trained and evaluated in turn, each batch its own ``ProfilerStep``: two
    training steps, then two evaluation batches (forward under ``torch.no_grad()``, loss and metric
    all-reduced, as :func:`case_ddp_eval_only`), ``cycles`` times; the profiler's warm-up is one training
    step before them."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(make_model())
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    train = ddp_loop(model, opt, 1, False)
    rank = dist.get_rank()

    def step(i):
        if i == 0 or (i - 1) % 4 < 2:
            train(i)
            return
        with torch.no_grad():
            x, y = batch(rank, 1_000 + i, 0)
            out = model(x)
            loss = loss_fn(out, y).reshape(1)
            close = (out - y).abs().lt(1.0).float().sum().reshape(1)
            dist.all_reduce(loss)
            dist.all_reduce(close)

    run_profiled(outdir, 4 * cycles, step)


def case_fsdp2_eval_own_steps(outdir, cycles=3):
    """FSDP2 (as ``case_fsdp2``, one micro-batch) trained and evaluated in turn, the evaluation its own
    ``ProfilerStep``: two training steps, then :func:`evaluate`, ``cycles`` times (the profiler's warm-up is
    one training step before them)."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("shard",))
    model = fsdp2_model(mesh)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    train = fsdp2_loop(model, opt, 1, True)

    def step(i):
        if i % 3 == 0 and i:
            evaluate(model)
        else:
            train(i)

    run_profiled(outdir, 3 * cycles, step)


def case_fsdp2_eval_every(outdir, every=2, steps=4):
    """FSDP2 (as ``case_fsdp2``) with an evaluation after every ``every``-th optimizer step, inside that
    step's ``ProfilerStep`` (``prof.step()`` after it): 2 batches of forward passes under
    ``torch.no_grad()``, each all-reducing its 16 per-sample losses. The warm-up step (0) evaluates, so of
    the profiled steps 1 … ``steps`` those that ``every`` divides hold evaluations (2 and 4 where 2)."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("shard",))
    model = fsdp2_model(mesh)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    run_profiled(outdir, steps, evaluating(model, fsdp2_loop(model, opt, 1, True), every))


def evaluate(model):
    """An evaluation: 2 batches of forward passes under ``torch.no_grad()``, each all-reducing its 16
    per-sample losses."""
    rank = dist.get_rank()
    with torch.no_grad():
        for b in range(2):
            x, y = batch(rank, 100 + b, 0)
            losses = torch.cat([(model(x) - y).square().mean(dim=1), torch.zeros(16 - len(x))])
            dist.all_reduce(losses)


def evaluating(model, train_step, every):
    """``train_step`` followed, after every ``every``-th optimizer step (0 too), by :func:`evaluate`."""
    def step(i):
        train_step(i)
        if i % every == 0:
            evaluate(model)

    return step


def fsdp2_evaluation_facts(every, steps, more=""):
    """What :func:`case_fsdp2_eval_every` ran with ``every`` and ``steps``, for its run.json."""
    when = ", ".join(map(str, range(0, steps + 1, every)))
    return {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True; after every "
                  f"{every}{'nd' if every == 2 else 'rd'} optimizer step ({when}), inside its ProfilerStep, "
                  f"an evaluation of 2 batches (a 16-element loss all-reduce each){more}",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": steps}


def case_fsdp2_mixed(outdir):
    from torch.distributed.fsdp import MixedPrecisionPolicy

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    case_fsdp2(outdir, mp_policy=mp)


def case_hsdp_2x4_mixed(outdir, log_loss=False):
    """HSDP on 8 ranks (replicate 2 × shard 4) with :func:`case_fsdp2_mixed`'s precision, 2 micro-batches a
    step, the gradients synchronised in the last alone; with ``log_loss``, each step's last loss all-reduced
    over the world after the optimizer step (``fsdp2_loop``'s)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy

    mesh = init_device_mesh("cpu", (2, 4), mesh_dim_names=("replicate", "shard"))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    model = fsdp2_model(mesh, mp)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    run_profiled(outdir, 2, fsdp2_loop(model, opt, 2, sync_every=False, log_loss=log_loss))


def hsdp_all_reduce_last_case(k):
    """A case of HSDP as ``hsdp-2x2`` with ``k`` micro-batches a step and ``set_requires_all_reduce(False)``
    on all but the last: reduce-scatters in every micro-batch, the replicate all-reduce in the last alone."""
    first, every = (("the first", "both micro-batches") if k == 2
                    else (f"the first {k - 1}", "every micro-batch"))
    return (lambda o: case_fsdp2(o, mesh_shape=(2, 2), mesh_names=("replicate", "shard"), k=k, steps=2,
                                 all_reduce_every=False), {
        "scheme": f"HSDP as hsdp-2x2, {k} micro-batches, set_requires_all_reduce(False) on {first}: "
                  f"reduce-scatters in {every}, the replicate all-reduce in the last alone",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((2, 2)),
        "micro_batches": k, "steps_profiled": 2,
        "grad_sync": "reduce-scatter every micro-batch, all-reduce in the last only"})


def case_hsdp_metrics(outdir):
    """HSDP as ``hsdp-2x2`` (FSDP2 on a 2 × 2 mesh, one micro-batch a step), the loss the mean of the
    per-sample losses, and after each optimizer step those 8 per-sample losses (padded to 16) all-reduced
    over the world, as a loop that logs a metric vector does."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    model = fsdp2_model(mesh)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    rank = dist.get_rank()

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        x, y = batch(rank, step, 0)
        per_sample = nn.functional.mse_loss(model(x), y, reduction="none").mean(dim=1)
        per_sample.mean().backward()
        opt.step()
        dist.all_reduce(torch.cat([per_sample.detach(), torch.zeros(16 - len(per_sample))]))

    run_profiled(outdir, 2, train_step)


PP_MICRO_BATCHES = 2


def case_pp2_dp2(outdir):
    """Pipeline parallelism of 2 stages × data parallelism of 2, by hand (GPipe's order: every
    micro-batch's forward, then every backward): stage s on ranks {2s, 2s+1}, layers 0-1 on stage 0 and
    layer 2 on stage 1; a rank sends its activations to, and receives their gradients from, its peer in
    the other stage (rank ± 2, point-to-point on the world); after the backward each stage all-reduces
    its gradients over its data-parallel group ({0, 1} or {2, 3}), one call a tensor."""
    rank = dist.get_rank()
    dp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]  # every rank creates every group
    stage, dp_rank = rank // 2, rank % 2
    peer = rank + 2 if stage == 0 else rank - 2
    layers = make_model().layers[:2] if stage == 0 else make_model().layers[2:]
    opt = torch.optim.Adam(layers.parameters(), lr=LR)
    width = LAYERS[1][1]  # the activation between the stages: Linear(192, 160)'s output

    def forward(x):
        for layer in layers:
            x = layer(x)
            if stage == 0:
                x = torch.relu(x)
        return x

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        sent, received, outs = [], [], []
        for m in range(PP_MICRO_BATCHES):
            x, y = batch(dp_rank, step, m)
            if stage == 0:
                out = forward(x)
                dist.send(out.detach(), peer)
                sent.append(out)
            else:
                act = torch.empty(MICRO_BATCH, width)
                dist.recv(act, peer)
                act.requires_grad_()
                received.append(act)
                outs.append(loss_fn(forward(act), y).div(PP_MICRO_BATCHES))
        for m in range(PP_MICRO_BATCHES):
            if stage == 1:
                outs[m].backward()
                dist.send(received[m].grad, peer)
            else:
                grad = torch.empty(MICRO_BATCH, width)
                dist.recv(grad, peer)
                sent[m].backward(grad)
        for p in layers.parameters():
            dist.all_reduce(p.grad, group=dp_groups[stage])
        opt.step()

    run_profiled(outdir, 3, train_step)


def case_pp2_fsdp2(outdir):
    """PyTorch's own pipeline parallelism (``torch.distributed.pipelining``: ``PipelineStage`` and
    ``ScheduleGPipe``, ``PP_MICRO_BATCHES`` micro-batches a step) on the ``pp`` dimension of a 2 × 2
    DeviceMesh (``pp``, ``dp``), and FSDP2 (``fully_shard`` per Linear + the stage) on its ``dp`` dimension,
    as torchtitan composes them: stage 0 holds layers 0-1, stage 1 layer 2. The schedule keeps each
    stage's gradients unreduced and its backward's gathers kept until the last micro-batch
    (``set_requires_gradient_sync(False)``, ``set_reshard_after_backward(False)``)."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "dp"))
    full = make_model()
    first = mesh["pp"].get_local_rank() == 0
    part = (nn.Sequential(full.layers[0], nn.ReLU(), full.layers[1], nn.ReLU()) if first
            else nn.Sequential(full.layers[2]))
    run_fsdp2_stage(outdir, mesh, part, 3)


def run_fsdp2_stage(outdir, mesh, part, steps, schedule="GPipe", micro_batches=PP_MICRO_BATCHES, stages=None):
    """FSDP2 (``fully_shard`` per Linear + the stage) on the ``dp`` dimension of ``mesh`` for this rank's
    pipeline stage ``part``, run by ``torch.distributed.pipelining``'s ``Schedule<schedule>``
    (``micro_batches`` a step) on its ``pp`` dimension, each dp rank on its own batches; ``steps`` profiled
    optimizer steps. ``stages``: for a schedule of several stages a rank (``Interleaved1F1B``), this
    rank's ``(stage index, part)`` pairs of ``2 * len(stages)`` stages in all (``part`` unused)."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage, schedules

    pp, dp_rank = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()
    mine = stages or [(pp, part)]
    n_stages = 2 * len(mine)
    pipes, params = [], []
    for index, module in mine:
        for m in module:
            if isinstance(m, nn.Linear):
                fully_shard(m, mesh=mesh["dp"])
        fully_shard(module, mesh=mesh["dp"])
        pipes.append(PipelineStage(module, index, n_stages, torch.device("cpu"),
                                   group=mesh["pp"].get_group()))
        params += list(module.parameters())
    cls = getattr(schedules, f"Schedule{schedule}")
    sched = cls(pipes if stages else pipes[0], n_microbatches=micro_batches, loss_fn=loss_fn)
    opt = torch.optim.Adam(params, lr=LR)
    first = any(index == 0 for index, _ in mine)
    last = any(index == n_stages - 1 for index, _ in mine)

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        xs, ys = zip(*(batch(dp_rank, step, m) for m in range(micro_batches)), strict=True)
        args = (torch.cat(xs),) if first else ()
        kwargs = {"target": torch.cat(ys), "losses": []} if last else {}
        sched.step(*args, **kwargs)
        opt.step()

    run_profiled(outdir, steps, train_step)


def case_pp2_fsdp2_schedule(outdir, schedule, micro_batches):
    """``case_pp2_fsdp2`` (its model, stages and FSDP2) run by ``Schedule<schedule>`` with ``micro_batches``
    a step: ``1F1B`` runs a stage's warm-up forwards, then one forward and one backward in turn, where
    GPipe runs every forward first."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "dp"))
    full = make_model()
    first = mesh["pp"].get_local_rank() == 0
    part = (nn.Sequential(full.layers[0], nn.ReLU(), full.layers[1], nn.ReLU()) if first
            else nn.Sequential(full.layers[2]))
    run_fsdp2_stage(outdir, mesh, part, 2, schedule=schedule, micro_batches=micro_batches)


#: the interleaved case's four stages of DEEP_LAYERS: layers [bounds[s], bounds[s + 1]) in stage s
INTERLEAVED_BOUNDS = (0, 2, 3, 5, 6)


def case_pp2_fsdp2_interleaved(outdir, schedule="Interleaved1F1B", micro_batches=4):
    """PyTorch's interleaved pipeline schedule (``Schedule<schedule>``, ``micro_batches`` a step) over 4
    stages of :data:`DEEP_LAYERS`' 6 Linears (:data:`INTERLEAVED_BOUNDS`: layers 0-1, 2, 3-4, 5), two a
    rank of the ``pp`` dimension of a 2 × 2 DeviceMesh (``pp``, ``dp``): stages 0 and 2 on ranks 0 and 1,
    stages 1 and 3 on ranks 2 and 3; FSDP2 (``fully_shard`` per Linear + each stage) on ``dp``."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "dp"))
    full = make_model(layers=DEEP_LAYERS)
    pp = mesh["pp"].get_local_rank()
    stages = []
    for index in (pp, pp + 2):
        lo, hi = INTERLEAVED_BOUNDS[index], INTERLEAVED_BOUNDS[index + 1]
        mods = []
        for k in range(lo, hi):
            mods.append(full.layers[k])
            if k < len(DEEP_LAYERS) - 1:
                mods.append(nn.ReLU())
        stages.append((index, nn.Sequential(*mods)))
    run_fsdp2_stage(outdir, mesh, None, 2, schedule=schedule, micro_batches=micro_batches, stages=stages)


def case_pp2_fsdp2_tp2(outdir):
    """3-D parallelism on 8 ranks as torchtitan composes it on a (``pp``, ``dp``, ``tp``) DeviceMesh of
    2 × 2 × 2: ``torch.distributed.pipelining`` (``ScheduleGPipe``, ``PP_MICRO_BATCHES`` micro-batches) on
    ``pp`` (stage 0 layers 0-1, stage 1 layer 2), tensor parallelism on ``tp`` in stage 0 (``layers.0``
    ``ColwiseParallel``, ``layers.1`` ``RowwiseParallel``, as ``case_fsdp2_tp2``; stage 1's one layer is
    whole on both of its tensor-parallel ranks), and FSDP2 (``fully_shard`` per Linear + the stage) on
    ``dp``. Rank = 4·stage + 2·dp + tp."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=("pp", "dp", "tp"))
    full = make_model()
    if mesh["pp"].get_local_rank() == 0:
        part = nn.Sequential(full.layers[0], nn.ReLU(), full.layers[1], nn.ReLU())
        parallelize_module(part, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    else:
        part = nn.Sequential(full.layers[2])
    run_fsdp2_stage(outdir, mesh, part, 2)


def case_tp2_dp2(outdir, dp=2, steps=3):
    """Tensor parallelism of 2 × data parallelism of 2 (``dp``), Megatron's MLP split by hand:
    tensor-parallel groups {0, 1} and {2, 3} (consecutive ranks; … {2·dp - 2, 2·dp - 1}), data-parallel
    groups {0, 2} and {1, 3} (the even and the odd ranks). ``layers.0`` is
    split by its outputs (each rank 96 of 192; its input's gradient all-reduced over the tensor-parallel
    group in the backward), ``layers.1`` by its inputs (each rank 96 of 192, its output all-reduced over the
    group in the forward, the bias whole on both), ``layers.2`` whole on both. After the backward each rank
    all-reduces its gradients over its data-parallel group, one call a tensor.

    Over gloo the profiler trace names no call's group: its two groups of 2 are told apart by the worker
    threads each group starts (``zerocalc.traces.kineto_groups._worker_groups``). Its Flight Recorder
    dumps (``../flight-recorder/make_runs.py``) name each call's group."""
    rank = dist.get_rank()
    # every rank creates every group, the tensor-parallel ones first
    tp_groups = [dist.new_group([2 * i, 2 * i + 1]) for i in range(dp)]
    dp_groups = [dist.new_group(list(range(j, 2 * dp, 2))) for j in (0, 1)]
    tp, tp_rank = tp_groups[rank // 2], rank % 2
    dp, dp_rank = dp_groups[rank % 2], rank // 2

    class CopyToTP(torch.autograd.Function):  # identity forward, all-reduce of the gradient backward
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            g = g.clone()
            dist.all_reduce(g, group=tp)
            return g

    class ReduceFromTP(torch.autograd.Function):  # all-reduce forward, identity backward
        @staticmethod
        def forward(ctx, x):
            x = x.clone()
            dist.all_reduce(x, group=tp)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    full = make_model()
    half = LAYERS[0][1] // 2
    cols = slice(tp_rank * half, (tp_rank + 1) * half)
    l0 = nn.Linear(LAYERS[0][0], half)
    l1 = nn.Linear(half, LAYERS[1][1])
    l2 = nn.Linear(*LAYERS[2])
    with torch.no_grad():
        l0.weight.copy_(full.layers[0].weight[cols]), l0.bias.copy_(full.layers[0].bias[cols])
        l1.weight.copy_(full.layers[1].weight[:, cols]), l1.bias.copy_(full.layers[1].bias)
        l2.weight.copy_(full.layers[2].weight), l2.bias.copy_(full.layers[2].bias)
    params = [*l0.parameters(), *l1.parameters(), *l2.parameters()]
    opt = torch.optim.Adam(params, lr=LR)

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        x, y = batch(dp_rank, step, 0)
        h = torch.relu(l0(CopyToTP.apply(x)))
        h = torch.relu(ReduceFromTP.apply(nn.functional.linear(h, l1.weight)) + l1.bias)
        loss_fn(l2(h), y).backward()
        for p in params:
            dist.all_reduce(p.grad, group=dp)
        opt.step()

    run_profiled(outdir, steps, train_step)


def case_tp(outdir, *, k=1, first_whole=False, layers=LAYERS):
    """Tensor parallelism alone over the world's 4 ranks (PyTorch's ``parallelize_module`` on a 1-D
    DeviceMesh ``tp``), no data parallelism: every rank trains on the same micro-batches. Default:
    ``layers.0`` ``ColwiseParallel``, ``layers.1`` ``RowwiseParallel``, ``layers.2`` whole (the all-reduce
    of ``layers.1``'s output in the forward is the only reduction: the model's input needs no gradient).
    ``first_whole``: ``layers.0`` whole, ``layers.1`` ``ColwiseParallel`` and ``layers.2``
    ``RowwiseParallel`` (Megatron's MLP block behind a layer that needs its input's gradient: the
    all-reduce of ``layers.2``'s output in the forward, and of ``layers.1``'s input gradient in the
    backward). ``k`` micro-batches an optimizer step; ``layers``: the Linear layers' sizes. The gradients
    of the whole layers are the same on every rank, so nothing reduces them."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("tp",))
    model = make_model(layers=layers)
    plan = ({"layers.1": ColwiseParallel(), "layers.2": RowwiseParallel()} if first_whole
            else {"layers.0": ColwiseParallel(), "layers.1": RowwiseParallel()})
    parallelize_module(model, mesh["tp"], plan)
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        for m in range(k):
            x, y = batch(0, step, m)  # the same data on every rank
            loss_fn(model(x), y).div(k).backward()
        opt.step()

    run_profiled(outdir, 3, train_step)


def case_tp_sp(outdir):
    """Tensor parallelism with sequence parallelism over the world's 4 ranks, no data parallelism, as
    torchtitan splits a model (``parallelize_module`` on a 1-D DeviceMesh ``tp``; every parameter a DTensor,
    every rank the same micro-batches): ``layers.0`` ``RowwiseParallel(input_layouts=Replicate(),
    output_layouts=Shard(0))`` (as its token embedding: the output reduce-scattered to a quarter of the
    samples each), ``layers.1`` ``ColwiseParallel(input_layouts=Shard(0))`` (its input all-gathered) and
    ``layers.2`` ``RowwiseParallel()`` (its output all-reduced). In the backward, the gradients of the
    gathered input reduce-scattered and of the scattered output all-gathered; the model's input needs
    none."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("tp",))
    model = make_model()
    parallelize_module(model, mesh["tp"], {
        "layers.0": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(0)),
        "layers.1": ColwiseParallel(input_layouts=Shard(0)),
        "layers.2": RowwiseParallel()})
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        x, y = batch(0, step, 0)  # the same data on every rank
        loss_fn(model(x), y).backward()
        opt.step()

    run_profiled(outdir, 3, train_step)


def _fsdp2_on_dp(model, mesh, modules):
    """FSDP2 on the ``dp`` dimension of a (``dp``, ``tp``) DeviceMesh: ``fully_shard`` on each of
    ``modules`` in order, then on the root; returns Adam over the model's parameters and the rank's
    ``dp`` and ``tp`` coordinates."""
    from torch.distributed.fsdp import fully_shard

    for m in modules:
        fully_shard(m, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    return opt, mesh["dp"].get_local_rank(), mesh["tp"].get_local_rank()


def case_fsdp2_tp2(outdir, sequence_parallel=False):
    """PyTorch's own tensor parallelism (``parallelize_module``: ``layers.0`` ``ColwiseParallel``,
    ``layers.1`` ``RowwiseParallel``, ``layers.2`` whole) on the ``tp`` dimension of a 2 × 2 DeviceMesh
    (``dp``, ``tp``), and FSDP2 (``fully_shard`` per Linear + root) on its ``dp`` dimension, as torchtitan
    composes them. The tensor-parallel all-reduce of ``layers.1``'s output runs in the forward. With
    ``sequence_parallel``, each tensor-parallel rank takes half the micro-batch's samples
    (``ColwiseParallel(input_layouts=Shard(0))``, ``RowwiseParallel(output_layouts=Shard(0))``), so the
    tensor-parallel group all-gathers the input and reduce-scatters the output in place of that all-reduce,
    and their gradients likewise in the backward."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = make_model()
    plan = {"layers.0": ColwiseParallel(), "layers.1": RowwiseParallel()}
    if sequence_parallel:
        plan = {"layers.0": ColwiseParallel(input_layouts=Shard(0)),
                "layers.1": RowwiseParallel(output_layouts=Shard(0))}
    parallelize_module(model, mesh["tp"], plan)
    opt, dp_rank, tp_rank = _fsdp2_on_dp(model, mesh, model.layers)
    half = MICRO_BATCH // 2
    mine = slice(tp_rank * half, (tp_rank + 1) * half) if sequence_parallel else slice(None)

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        x, y = batch(dp_rank, step, 0)
        loss_fn(model(x[mine]), y[mine]).backward()
        opt.step()

    run_profiled(outdir, 3, train_step)


class NormMLP(nn.Module):
    """``LayerNorm(128)`` before :func:`make_model`'s layers (seed 0), as a transformer block's norm comes
    before its MLP."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.norm = nn.LayerNorm(LAYERS[0][0])
        self.layers = make_model().layers

    def forward(self, x):
        x = self.norm(x)
        for k, layer in enumerate(self.layers):
            x = torch.relu(layer(x)) if k < len(self.layers) - 1 else layer(x)
        return x


def case_fsdp2_tp2_sp_norm(outdir):
    """FSDP2 with tensor and sequence parallelism as torchtitan's plan for a transformer composes them, on a
    2 × 2 DeviceMesh (``dp``, ``tp``) and :class:`NormMLP`: the norm ``SequenceParallel(sequence_dim=0)``
    (its weight and bias replicated on ``tp``, each tensor-parallel rank normalising its half of the
    micro-batch's samples), ``layers.0`` ``ColwiseParallel(input_layouts=Shard(0))``, ``layers.1``
    ``RowwiseParallel(output_layouts=Shard(0))``, ``layers.2`` ``ColwiseParallel(input_layouts=Shard(0),
    output_layouts=Replicate())`` (as torchtitan's output layer without loss parallelism), so every parameter
    is a DTensor and the loss is taken on the whole micro-batch on each tensor-parallel rank; then FSDP2
    (``fully_shard`` on the norm, each Linear and the root) on ``dp``. The replicated norm's gradients are
    partial sums over the tensor-parallel ranks: FSDP2's post-backward all-reduces them on ``tp`` (inside
    ``Redistribute``) before it reduce-scatters them on ``dp``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = NormMLP()
    parallelize_module(model, mesh["tp"], {
        "norm": SequenceParallel(sequence_dim=0),
        "layers.0": ColwiseParallel(input_layouts=Shard(0)),
        "layers.1": RowwiseParallel(output_layouts=Shard(0)),
        "layers.2": ColwiseParallel(input_layouts=Shard(0), output_layouts=Replicate())})
    opt, dp_rank, tp_rank = _fsdp2_on_dp(model, mesh, [model.norm, *model.layers])
    half = MICRO_BATCH // 2

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        x, y = batch(dp_rank, step, 0)
        loss_fn(model(x[tp_rank * half:(tp_rank + 1) * half]), y).backward()
        opt.step()

    run_profiled(outdir, 3, train_step)


MOE_EXPERTS, MOE_EP = 4, 2
MOE_DENSE_PSI = 128 * 192 + 192 + 192 * MOE_EXPERTS + 192 * 96 + 96  # l0, the gate, l2: 44,064
MOE_EXPERT_PSI = MOE_EXPERTS // MOE_EP * (192 * 160 + 160 + 160 * 192 + 192)  # a rank's experts: 123,584
MOE_CAP = 8  # slots per expert a micro-batch (a micro-batch has MICRO_BATCH tokens: none dropped)


class ExpertParallelMoE(nn.Module):
    """A mixture-of-experts layer by hand, as torchtitan's expert parallelism runs one: a top-1 gate
    ``Linear(192, MOE_EXPERTS, bias=False)``, ``MOE_EXPERTS`` experts of Linear(192, 160) - ReLU -
    Linear(160, 192) of which this rank holds ``MOE_EXPERTS / MOE_EP`` (``self.experts``), and each token
    sent to its expert's rank and back by ``all_to_all_single`` on the expert-parallel group, ``MOE_CAP``
    slots per expert (tokens past them dropped, as DeepSpeed's capacity does)."""

    def __init__(self, ep_group):
        super().__init__()
        self.group, self.ep = ep_group, dist.get_world_size(ep_group)
        self.local = MOE_EXPERTS // self.ep
        self.gate = nn.Linear(192, MOE_EXPERTS, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(192, 160), nn.ReLU(), nn.Linear(160, 192))
                                     for _ in range(self.local))

    def forward(self, h):
        from torch.distributed.nn.functional import all_to_all_single

        probs = self.gate(h).softmax(-1)
        top, expert = probs.max(-1)
        slots = torch.zeros(MOE_EXPERTS, MOE_CAP, h.shape[-1])
        where = []
        for e in range(MOE_EXPERTS):
            rows = (expert == e).nonzero().flatten()[:MOE_CAP]
            slots[e, :len(rows)] = h[rows]
            where.append(rows)
        # [expert, slot, hidden] → to each expert's rank (the experts of rank r are r·local … r·local+local-1)
        got = all_to_all_single(torch.empty_like(slots), slots.contiguous(), group=self.group)
        got = got.view(self.ep, self.local, MOE_CAP, -1)
        done = torch.stack([self.experts[j](got[:, j]) for j in range(self.local)], dim=1)
        back = all_to_all_single(torch.empty_like(slots), done.reshape(slots.shape).contiguous(),
                                 group=self.group)
        out = torch.zeros_like(h)
        for e in range(MOE_EXPERTS):
            out = out.index_add(0, where[e], back[e, :len(where[e])] * top[where[e], None])
        return out


class ExpertParallelNet(nn.Module):
    """``l0`` Linear(128, 192) - ReLU - :class:`ExpertParallelMoE` - ReLU - ``l2`` Linear(192, 96)."""

    def __init__(self, ep_group):
        super().__init__()
        torch.manual_seed(0)
        self.l0, self.moe, self.l2 = nn.Linear(128, 192), ExpertParallelMoE(ep_group), nn.Linear(192, 96)

    def forward(self, x):
        return self.l2(torch.relu(self.moe(torch.relu(self.l0(x)))))


def case_fsdp2_expert_parallel(outdir):
    """FSDP2 with expert parallelism as torchtitan composes them: ``l0`` - ReLU -
    :class:`ExpertParallelMoE` - ReLU - ``l2``, a 2 × 2 DeviceMesh (``efsdp``, ``ep``): the experts
    ``fully_shard`` on ``efsdp`` (the ranks holding the same experts, {0, 2} and {1, 3}), tokens exchanged on
    ``ep`` ({0, 1}, {2, 3}), the dense layers ``fully_shard`` on all 4 and the root (holding the gate) too,
    every module with reshard_after_forward=True."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("efsdp", "ep"))
    world = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("dp",))
    model = ExpertParallelNet(mesh["ep"].get_group())
    # the rank's experts as one FSDP group (a ModuleList has no forward: its modules, as a list)
    fully_shard(list(model.moe.experts), mesh=mesh["efsdp"], reshard_after_forward=True)
    for layer in (model.l0, model.l2):
        fully_shard(layer, mesh=world, reshard_after_forward=True)
    fully_shard(model, mesh=world, reshard_after_forward=True)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    run_profiled(outdir, 2, fsdp2_loop(model, opt, 1, True))


def case_hsdp_tp(outdir):
    """HSDP beside tensor parallelism on 8 ranks, as torchtitan composes them on a 3-D DeviceMesh
    (``replicate``, ``shard``, ``tp``) of 2 × 2 × 2: ``parallelize_module`` on ``tp`` (``layers.0``
    ``ColwiseParallel``, ``layers.1`` ``RowwiseParallel``, as ``case_fsdp2_tp2``), then ``fully_shard`` per
    Linear and the root on the 2-D (``replicate``, ``shard``) submesh: HSDP, each shard all-reduced on its
    replicate group. Rank = 4·replicate + 2·shard + tp: its data-parallel place is rank // 2."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=("replicate", "shard", "tp"))
    model = make_model()
    parallelize_module(model, mesh["tp"], {"layers.0": ColwiseParallel(), "layers.1": RowwiseParallel()})
    for layer in model.layers:
        fully_shard(layer, mesh=mesh["replicate", "shard"])
    fully_shard(model, mesh=mesh["replicate", "shard"])
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    run_profiled(outdir, 2, fsdp2_loop(model, opt, 1, True, data_rank=dist.get_rank() // 2))


# --- DeepSpeed cases ------------------------------------------------------------------------------

DS_GA = 4


def ds_config(stage, reuse_distance=1_000_000_000, prefetch=50_000_000, bf16=False, hpz=None, ga=DS_GA,
              bucket=500_000_000, offload=(), comm_dtype=None, live=1_000_000_000):
    """DeepSpeed's config for ZeRO ``stage``; ``offload`` the states ZeRO-Offload keeps in host memory
    (``"optimizer"``, and for stage 3 ``"param"``), the client's torch Adam kept
    (``zero_force_ds_cpu_optimizer`` false: DeepSpeedCPUAdam is a compiled op, and the optimizer's
    arithmetic sends nothing)."""
    zero = {
        "stage": stage,
        "overlap_comm": False,
        "contiguous_gradients": True,
        "reduce_bucket_size": bucket,
        "allgather_bucket_size": bucket,
    }
    if hpz:  # ZeRO++ hierarchical partitioning: a secondary copy of the parameters in groups of hpz ranks
        zero["zero_hpz_partition_size"] = hpz
    for part in offload:  # ZeRO-Offload: the optimizer states (and stage 3's parameters) in host memory
        zero[f"offload_{part}"] = {"device": "cpu"}
    if stage == 3:
        zero.update({
            "stage3_param_persistence_threshold": 0,
            "stage3_max_reuse_distance": reuse_distance,
            "stage3_max_live_parameters": live,
            "stage3_prefetch_bucket_size": prefetch,
        })
    cfg = {
        "train_micro_batch_size_per_gpu": MICRO_BATCH,
        "gradient_accumulation_steps": ga,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 1_000_000,
    }
    if bf16:
        cfg["bf16"] = {"enabled": True}
    if comm_dtype:  # the type DeepSpeed reduces the gradients in, whatever the model's
        cfg["communication_data_type"] = comm_dtype
    if offload:
        cfg["zero_force_ds_cpu_optimizer"] = False
    return cfg


def ds_comm_bf16_case(stage, how):
    """A case of DeepSpeed ZeRO ``stage`` on the fp32 model with ``communication_data_type`` bf16: the
    gradients ``how`` all-gathered in fp32."""
    cfg = ds_config(stage, comm_dtype="bf16")
    return (lambda o: case_deepspeed(o, cfg), {
        "scheme": f"DeepSpeed ZeRO stage {stage}, an fp32 model with communication_data_type bf16: the "
                  f"gradients {how} all-gathered in fp32",
        "param_dtype": "float32", "reduce_dtype": "bfloat16 (communication_data_type)",
        "groups": {"dp": WORLD4}, "micro_batches": DS_GA, "steps_profiled": 2, "deepspeed_config": cfg})


def ds_gpt2_checkpoint_case(reentrant, transformers):
    """A case of ds-zero3-gpt2-past-reuse-distance with every block under activation checkpointing of
    ``use_reentrant`` ``reentrant`` (the default of that major release of ``transformers``)."""
    cfg = ds_config(3, ga=1, **DS_AS_7B)
    return (lambda o: case_ds_gpt2(o, cfg, reentrant=reentrant, **HF_GPT2_3), {
        "scheme": "ds-zero3-gpt2-past-reuse-distance with every block under activation checkpointing "
                  "(gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': "
                  f"{reentrant}}}), transformers {transformers}'s default)",
        "model": {"gpt2_config": {**HF_GPT2, **HF_GPT2_3}, "psi": 219_712, "sequence_length": HF_SEQ},
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "checkpointed": ["transformer.h.*"], "use_reentrant": reentrant,
        "micro_batches": 1, "steps_profiled": 2, "deepspeed_config": cfg})


def ds_gpt2_checkpoint_variant_case(what, config, psi, cfg, lora=0, **facts):
    """A case of DeepSpeed ZeRO-3 on transformers' GPT-2 (:func:`hf_gpt2` with ``config``, ``psi`` its
    parameters) with every block under non-reentrant activation checkpointing (transformers 5's default),
    ``cfg`` its config, ``what`` the scheme's words for the rest; with ``lora``, peft's LoRA of that rank."""
    return (lambda o: case_ds_gpt2(o, cfg, reentrant=False, lora=lora, **config), {
        "scheme": f"{what}, every block under activation checkpointing (gradient_checkpointing_enable("
                  "gradient_checkpointing_kwargs={'use_reentrant': False}), transformers 5's default)",
        "model": {"gpt2_config": {**HF_GPT2, **config}, "psi": psi, "sequence_length": HF_SEQ},
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "checkpointed": ["transformer.h.*"], "use_reentrant": False, **facts,
        "micro_batches": 1, "steps_profiled": 2, "deepspeed_config": cfg})


def ds_default_config(stage):
    """DeepSpeed's defaults but for the stage (so stage 3 keeps every parameter of this model whole: each has
    fewer than stage3_param_persistence_threshold = 1e5 elements)."""
    return {
        "train_micro_batch_size_per_gpu": MICRO_BATCH,
        "gradient_accumulation_steps": DS_GA,
        "zero_optimization": {"stage": stage},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 1_000_000,
    }


def case_deepspeed(outdir, cfg, steps=2, step_per_micro_batch=False, layers=LAYERS, warmup=1,
                   without_steps=False, evaluate_every=None, lora=0, checkpointed=()):
    """DeepSpeed's engine on :func:`make_model` (:func:`lora_model` of rank ``lora`` where given), ``cfg`` its
    config; with ``evaluate_every``, after every such optimizer step (the warm-up step 0 too), inside its
    ``ProfilerStep``, an evaluation of 2 batches (``engine.eval()``, forward passes under
    ``torch.no_grad()``, each all-reducing its 16 per-sample losses, then ``engine.train()``)."""
    import deepspeed

    model = lora_model(lora) if lora else make_model(layers=layers, checkpointed=checkpointed)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=LR)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    rank = dist.get_rank()

    def evaluate_engine(step):
        if evaluate_every and step % evaluate_every == 0:
            engine.eval()
            evaluate(engine)
            engine.train()

    if step_per_micro_batch:
        # one ProfilerStep per engine.step() call, as `engine.backward(loss); engine.step(); prof.step()`
        # puts it: every micro-batch (DeepSpeed steps the optimizer at every DS_GA-th); the warm-up is the
        # first micro-batch, so the profiled window starts inside an optimizer step
        def micro_batch(i):
            x, y = batch(rank, i // DS_GA, i % DS_GA, torch.bfloat16 if "bf16" in cfg else torch.float32)
            engine.backward(loss_fn(engine(x), y))
            engine.step()
            if (i + 1) % DS_GA == 0:  # after optimizer steps 2, 4, …: inside that micro-batch's ProfilerStep
                evaluate_engine(engine.global_steps)

        run_profiled(outdir, steps * DS_GA, micro_batch)
        return

    def train_step(step):
        # engine.step() steps the optimizer at the last micro-batch only
        for m in range(cfg["gradient_accumulation_steps"]):
            x, y = batch(rank, step, m, torch.bfloat16 if "bf16" in cfg else torch.float32)
            engine.backward(loss_fn(engine(x), y))
            engine.step()
        assert engine.global_steps == step + 1
        evaluate_engine(step)

    (run_profiled_without_steps if without_steps else run_profiled)(outdir, steps, train_step, warmup)


def case_deepspeed_pipeline(outdir, stage=1, steps=2):
    """DeepSpeed's pipeline engine: ``PipelineModule`` of this model's layers in 2 stages
    (``partition_method="parameters"``: ``layers.0`` on stage 0, ``layers.1`` and ``layers.2`` on stage 1),
    data parallelism 2 (DeepSpeed's topology puts the pipeline outermost: stage 0 on ranks 0 and 1, stage 1
    on 2 and 3), ZeRO stage ``stage``, ``DS_GA`` micro-batches an optimizer step run by
    ``engine.train_batch`` (DeepSpeed's 1F1B schedule), as Megatron-DeepSpeed and GPT-NeoX drive it."""
    import deepspeed
    from deepspeed.pipe import PipelineModule

    linear = make_model().layers  # the same weights as every case's
    layers = [linear[0], nn.ReLU(), linear[1], nn.ReLU(), linear[2]]
    model = PipelineModule(layers=layers, num_stages=2, loss_fn=loss_fn, partition_method="parameters")
    cfg = {"train_micro_batch_size_per_gpu": MICRO_BATCH, "gradient_accumulation_steps": DS_GA,
           "zero_optimization": {"stage": stage}, "steps_per_print": 1_000_000}
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    data_rank = engine.grid.get_data_parallel_rank()

    def batches(step):
        for m in range(DS_GA):
            yield batch(data_rank, step, m)

    run_profiled(outdir, steps, lambda step: engine.train_batch(batches(step)))


class MoEMLP(nn.Module):
    """Linear(128, 192) - ReLU - DeepSpeed ``MoE`` (``MOE_EXPERTS`` experts of Linear(192, 160) - ReLU -
    Linear(160, 192), top-1 gate, expert parallelism ``MOE_EP``) - ReLU - Linear(192, 96): the dense layers
    and the gate data-parallel on every rank, each rank holding MOE_EXPERTS / MOE_EP experts, its tokens
    sent to their experts' ranks by all-to-all on its expert-parallel group."""

    def __init__(self):
        from deepspeed.moe.layer import MoE

        super().__init__()
        torch.manual_seed(0)
        self.l0 = nn.Linear(128, 192)
        expert = nn.Sequential(nn.Linear(192, 160), nn.ReLU(), nn.Linear(160, 192))
        self.moe = MoE(hidden_size=192, expert=expert, num_experts=MOE_EXPERTS, ep_size=MOE_EP, k=1,
                       capacity_factor=4.0, eval_capacity_factor=4.0, min_capacity=8)
        self.l2 = nn.Linear(192, 96)

    def forward(self, x):
        h, aux, _ = self.moe(torch.relu(self.l0(x)))
        return self.l2(torch.relu(h)), aux




def case_deepspeed_moe(outdir, cfg, steps=2):
    """DeepSpeed MoE (:class:`MoEMLP`) under the engine, the experts' parameters in an optimizer group of
    their own (``split_params_into_different_moe_groups_for_optimizer``), as DeepSpeed's MoE tutorial
    builds it; loss + 0.01 × the gate's load-balancing loss."""
    import deepspeed
    from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer

    model = MoEMLP()
    groups = split_params_into_different_moe_groups_for_optimizer({"params": list(model.parameters()),
                                                                   "name": "parameters"})
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.Adam(groups, lr=LR), config=cfg)
    rank = dist.get_rank()

    def train_step(step):
        for m in range(DS_GA):
            x, y = batch(rank, step, m)
            out, aux = engine(x)
            engine.backward(loss_fn(out, y) + 0.01 * aux)
            engine.step()

    run_profiled(outdir, steps, train_step)


# --- the cases ------------------------------------------------------------------------------------

# --- DeepSpeed AutoTP: tensor parallelism of a Hugging Face model beside ZeRO --------------------------

#: a Llama of one decoder layer (transformers' ``LlamaConfig``, random weights, seed 0): AutoTP training
#: splits Llama's attention and MLP projections and its output head; GPT-2 it refuses (kernel injection)
AUTOTP_LLAMA = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
                "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 64}
AUTOTP_MICRO_BATCH = 2  # sequences a micro-batch
AUTOTP_SEQ = 16  # tokens a sequence


def autotp_config(stage, tp=2, ga=2):
    """DeepSpeed's config for ZeRO ``stage`` beside AutoTP training of ``tp`` ranks
    (``tensor_parallel.autotp_size``, DeepSpeed 0.16.4 and later), ``ga`` micro-batches a step."""
    return {"train_micro_batch_size_per_gpu": AUTOTP_MICRO_BATCH, "gradient_accumulation_steps": ga,
            "zero_optimization": {"stage": stage}, "tensor_parallel": {"autotp_size": tp},
            "zero_allow_untested_optimizer": True, "steps_per_print": 1_000_000}


def case_deepspeed_autotp(outdir, cfg, steps=2):
    """DeepSpeed's engine on :data:`AUTOTP_LLAMA` with AutoTP training (``cfg``: :func:`autotp_config`):
    DeepSpeed splits each tensor-parallel group's copy of the model (its data-parallel groups the ranks
    alike in it) and reduces the gradients over the data-parallel group by ZeRO's rule; each data-parallel
    rank on its own random token sequences (the labels the inputs, a causal LM's)."""
    import deepspeed
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**AUTOTP_LLAMA))
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    tp = cfg["tensor_parallel"]["autotp_size"]
    data_rank = dist.get_rank() // tp

    def train_step(step):
        for m in range(cfg["gradient_accumulation_steps"]):
            g = torch.Generator().manual_seed(1000 * step + 10 * m + data_rank)
            ids = torch.randint(0, AUTOTP_LLAMA["vocab_size"], (AUTOTP_MICRO_BATCH, AUTOTP_SEQ), generator=g)
            engine.backward(engine(input_ids=ids, labels=ids).loss)
            engine.step()

    run_profiled(outdir, steps, train_step)


#: the Ulysses case's sequences: SP ranks each take an equal slice of a sequence of this many tokens
ULYSSES_SEQ = 32


def ulysses_config(stage, sp=2):
    """DeepSpeed's config for ZeRO ``stage`` beside Ulysses sequence parallelism of ``sp`` ranks
    (``sequence_parallel_size``), one micro-batch of 2 sequences a step."""
    return {"train_micro_batch_size_per_gpu": AUTOTP_MICRO_BATCH, "gradient_accumulation_steps": 1,
            "zero_optimization": {"stage": stage}, "sequence_parallel_size": sp,
            "zero_allow_untested_optimizer": True, "steps_per_print": 1_000_000}


def case_deepspeed_ulysses(outdir, cfg, steps=2):
    """DeepSpeed's Ulysses sequence parallelism for Hugging Face models (Arctic Long Sequence Training:
    ``UlyssesSPAttentionHF.register_with_transformers`` over ``sdpa``, its ``mpu`` given to
    ``deepspeed.initialize``) on :data:`AUTOTP_LLAMA` with ``cfg`` (:func:`ulysses_config`): each
    sequence-parallel rank takes its slice of each sequence (:data:`ULYSSES_SEQ` tokens, ``position_ids``
    the global positions), the attention all-to-alls its heads and tokens over the sequence-parallel group,
    and ZeRO reduces the gradients over the data × sequence-parallel ranks; the loss is each rank's slice's
    cross entropy."""
    import deepspeed
    from deepspeed.runtime.sequence_parallel.ulysses_sp import UlyssesSPAttentionHF
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**AUTOTP_LLAMA, attn_implementation="sdpa"))
    sp = cfg["sequence_parallel_size"]
    mpu = UlyssesSPAttentionHF.register_with_transformers(
        model_name_or_path=model, core_attn_implementation="sdpa", sequence_parallel_size=sp,
        micro_batch_size=AUTOTP_MICRO_BATCH, seq_length=ULYSSES_SEQ, seq_length_is_variable=False)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg, mpu=mpu)
    rank = dist.get_rank()
    width = ULYSSES_SEQ // sp
    mine = slice(rank % sp * width, (rank % sp + 1) * width)
    positions = torch.arange(ULYSSES_SEQ).expand(AUTOTP_MICRO_BATCH, ULYSSES_SEQ)

    def train_step(step):
        g = torch.Generator().manual_seed(1000 * step + rank // sp)
        ids = torch.randint(0, AUTOTP_LLAMA["vocab_size"], (AUTOTP_MICRO_BATCH, ULYSSES_SEQ), generator=g)
        logits = engine(input_ids=ids[:, mine], position_ids=positions[:, mine]).logits
        engine.backward(nn.functional.cross_entropy(logits.reshape(-1, AUTOTP_LLAMA["vocab_size"]),
                                                    ids[:, mine].reshape(-1)))
        engine.step()

    run_profiled(outdir, steps, train_step)


# --- Hugging Face Trainer cases --------------------------------------------------------------------


class HFLoss(nn.Module):
    """:class:`MLP` as Trainer takes a model: ``forward(x, labels)`` returns ``{"loss": ...}``."""

    def __init__(self):
        super().__init__()
        self.mlp = make_model()

    def forward(self, x, labels):
        out = self.mlp(x)
        return {"loss": loss_fn(out, labels), "logits": out}


class HFData(torch.utils.data.Dataset):
    """Fixed random samples (``{"x", "labels"}``) that Trainer's own sampler splits over the ranks."""

    def __init__(self, n=4096):
        g = torch.Generator().manual_seed(10_000)
        self.x = torch.randn(n, LAYERS[0][0], generator=g)
        self.y = torch.randn(n, LAYERS[-1][1], generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


class HFTokens(torch.utils.data.Dataset):
    """Fixed random token sequences (``{"input_ids", "labels"}``, labels the inputs: a causal LM's)."""

    def __init__(self, n=2048):
        g = torch.Generator().manual_seed(10_000)
        self.ids = torch.randint(0, HF_GPT2["vocab_size"], (n, HF_SEQ), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


#: A GPT-2 small enough to trace (transformers' ``GPT2Config``; built from the config, no weights fetched)
HF_GPT2 = {"n_layer": 1, "n_embd": 64, "n_head": 2, "vocab_size": 512, "n_positions": 64, "bos_token_id": 0,
           "eos_token_id": 0}
HF_SEQ = 16  # tokens a sample


def hf_gpt2(**config):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(**{**HF_GPT2, **config}))


#: DeepSpeed ZeRO-3's defaults (stage3_max_reuse_distance and stage3_max_live_parameters 1e9 elements,
#: stage3_prefetch_bucket_size 5e7) scaled to the traced models as a model of 7e9 parameters sees them:
#: reuse distance and live parameters a seventh of Ψ, the prefetch bucket 1/140 (for HF_GPT2_3 below, Ψ =
#: 219,712 untied: 26,000 and 1,300 elements), so the backward gathers again the earlier modules' parameters
#: and keeps the last ones'
DS_AS_7B = {"reuse_distance": 26_000, "prefetch": 1_300, "live": 26_000}
#: HF_GPT2 with 3 blocks and the output layer's weight its own (``tie_word_embeddings=False``, as Llama 2
#: and 3 8B, Mistral 7B and Qwen 2.5 7B have it)
HF_GPT2_3 = {"n_layer": 3, "tie_word_embeddings": False}


#: the GPT-2 modules peft's LoRA adapts in the LoRA cases (every Conv1D: attention's c_attn and c_proj, the
#: MLP's c_fc and c_proj; Conv1D stores its weight transposed, so fan_in_fan_out)
HF_LORA_TARGETS = ["c_attn", "c_proj", "c_fc"]


def case_ds_gpt2(outdir, cfg, steps=2, reentrant=None, lora=0, **config):
    """DeepSpeed's engine on transformers' GPT-2 (:func:`hf_gpt2` with ``config``), ``cfg`` its config, its
    ``gradient_accumulation_steps`` micro-batches of :class:`HFTokens` an optimizer step, each
    ``engine.backward(loss); engine.step()``, ``steps`` profiled after a warm-up step; where ``reentrant`` is
    given, every block under activation checkpointing (``gradient_checkpointing_enable`` with that
    ``use_reentrant``: transformers 4's default True, 5's False); with ``lora``, peft's LoRA of that rank on
    :data:`HF_LORA_TARGETS`, the base model frozen, its adapters alone given to the optimizer."""
    import deepspeed

    model = hf_gpt2(**config)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=lora, target_modules=HF_LORA_TARGETS, fan_in_fan_out=True))
    if reentrant is not None:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    data, rank, world = HFTokens(), dist.get_rank(), dist.get_world_size()
    ga = cfg["gradient_accumulation_steps"]

    def step(s):
        for m in range(ga):
            ids = data.ids[((s * ga + m) * world + rank) * MICRO_BATCH:][:MICRO_BATCH]
            engine.backward(engine(input_ids=ids, labels=ids).loss)
            engine.step()

    run_profiled(outdir, steps, step)


def case_hf_trainer(outdir, *, ga=1, steps=2, deepspeed_config=None, gpt2=False, logging_steps=1,
                    eval_steps=None):
    """Hugging Face Trainer (``use_cpu``, ``ddp_backend="gloo"``; DDP, or DeepSpeed from
    ``deepspeed_config``) training :class:`HFLoss` for 1 warm-up + ``steps`` optimizer steps of ``ga``
    micro-batches, the profiler stepped by a ``TrainerCallback.on_step_end`` (after each optimizer step, as
    one adds a profiler to a Trainer run). Trainer's own loop runs everything else: its accumulation
    (Accelerate's ``no_sync`` under DDP), its gathers of the step's item count, its logging every step."""
    import tempfile

    from transformers import Trainer, TrainerCallback, TrainingArguments

    rank = dist.get_rank()
    kw = {}
    if deepspeed_config is not None:
        kw["deepspeed"] = deepspeed_config
    if eval_steps is not None:  # Trainer evaluates after every eval_steps-th step, in its own loop
        kw.update(eval_strategy="steps", eval_steps=eval_steps, per_device_eval_batch_size=MICRO_BATCH)
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(), use_cpu=True, ddp_backend="gloo", gradient_accumulation_steps=ga,
        per_device_train_batch_size=MICRO_BATCH, max_steps=1 + steps, learning_rate=LR,
        logging_steps=logging_steps,
        report_to=[], save_strategy="no", dataloader_num_workers=0, remove_unused_columns=False,
        disable_tqdm=True, seed=0, **kw)

    class StepProfiler(TrainerCallback):
        def __init__(self, prof):
            self.prof = prof

        def on_step_end(self, args, state, control, **kwargs):
            self.prof.step()

    def save(prof):
        prof.export_chrome_trace(os.path.join(outdir, f"rank{rank}.json.gz"))

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=1), on_trace_ready=save) as prof:
        model, data = (hf_gpt2(), HFTokens()) if gpt2 else (HFLoss(), HFData())
        held_out = None if eval_steps is None else (HFTokens(64) if gpt2 else HFData(64))
        Trainer(model=model, args=args, train_dataset=data, eval_dataset=held_out,
                callbacks=[StepProfiler(prof)]).train()


def case_fsdp1_gpt2_checkpoint(outdir, *, steps=2, layers=2):
    """FSDP1 ``FULL_SHARD`` on Hugging Face's GPT-2 (:data:`HF_GPT2`, ``layers`` blocks), one unit per
    ``GPT2Block`` (``transformer_auto_wrap_policy``) + root, under the model's own gradient checkpointing
    as transformers 4.35-4.x turned it on (``gradient_checkpointing_enable()``: ``use_reentrant=True``;
    transformers 5 passes ``False`` unless told): each block run as ``checkpoint(FSDP(block))``. AdamW, one
    micro-batch of :class:`HFTokens` a step, the loss the model's own."""
    import functools

    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**{**HF_GPT2, "n_layer": layers}))
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.train()
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={GPT2Block})
    model = FSDP(model, auto_wrap_policy=policy, device_id=torch.device("cpu"))
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    data, rank, world = HFTokens(), dist.get_rank(), dist.get_world_size()

    def train_step(step):
        opt.zero_grad(set_to_none=True)
        ids = data.ids[(step * world + rank) * MICRO_BATCH:][:MICRO_BATCH]
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()

    run_profiled(outdir, steps, train_step)


HF_OPTIMIZER = "AdamW (Trainer's default optim, adamw_torch_fused)"
#: ZeRO-3 as Trainer's DeepSpeed examples set it: persistence, prefetch and buckets "auto" (Trainer sizes them
#: from the model's hidden size: 10 h, 0.9 h², h²)
HF_DS_ZERO3_AUTO = {
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": "auto",
                          "stage3_prefetch_bucket_size": "auto", "reduce_bucket_size": "auto"},
    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
    "train_batch_size": "auto"}
HF_DS_ZERO2 = {"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto",
               "gradient_accumulation_steps": "auto", "train_batch_size": "auto"}


# --- Lightning cases ------------------------------------------------------------------------------


def case_lightning(outdir, *, ga=4, steps=2, sync_dist=False):
    """Lightning's ``Trainer`` (``accelerator="cpu"``, ``devices=4``, ``strategy="ddp"``: the process group
    torchrun's and this script's) training :class:`MLP` as a ``LightningModule`` (Adam, the loss logged
    every step, all-reduced where ``sync_dist``), ``accumulate_grad_batches=ga``, under Lightning's own
    ``PyTorchProfiler``
    (``record_shapes=True``, schedule wait 0 / warm-up 1 / active ``ga * steps``), its trace written by
    an ``on_trace_ready`` of ours (``rank{r}.json.gz``). That profiler steps torch's after every
    ``training_step`` (``PyTorchProfiler.stop``): one ``ProfilerStep`` per micro-batch, each from the end of
    one forward to the end of the next, the backward of the one before in it."""
    import tempfile

    import lightning as L
    from lightning.pytorch.profilers import PyTorchProfiler

    rank = dist.get_rank()

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.mlp = make_model()

        def training_step(self, batch, _):
            x, y = batch
            loss = loss_fn(self.mlp(x), y)
            self.log("loss", loss, sync_dist=sync_dist)
            return loss

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=LR)

    g = torch.Generator().manual_seed(10_000)
    data = torch.utils.data.TensorDataset(torch.randn(4096, LAYERS[0][0], generator=g),
                                          torch.randn(4096, LAYERS[-1][1], generator=g))

    def save(prof):
        prof.export_chrome_trace(os.path.join(outdir, f"rank{rank}.json.gz"))

    prof = PyTorchProfiler(dirpath=tempfile.mkdtemp(), filename="summary", record_shapes=True,
                           schedule=schedule(wait=0, warmup=1, active=ga * steps, repeat=1),
                           on_trace_ready=save)
    trainer = L.Trainer(accelerator="cpu", devices=dist.get_world_size(), strategy="ddp", max_steps=1 + steps,
                        accumulate_grad_batches=ga, profiler=prof, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=MICRO_BATCH))


def fsdp_groups(mesh_shape):
    if mesh_shape == (2, 2):  # DeviceMesh [[0, 1], [2, 3]]: dim 0 replicate, dim 1 shard
        return {"replicate": [[0, 2], [1, 3]], "shard": [[0, 1], [2, 3]]}
    if mesh_shape == (2, 4):  # DeviceMesh [[0, 1, 2, 3], [4, 5, 6, 7]]
        return {"replicate": [[0, 4], [1, 5], [2, 6], [3, 7]], "shard": [[0, 1, 2, 3], [4, 5, 6, 7]]}
    return {"shard": [[0, 1, 2, 3]]}


WORLD4 = [[0, 1, 2, 3]]
MOE_MODEL = {"layers": ["Linear(128, 192)", "MoE(gate Linear(192, 4, bias=False), 4 experts of "
                              "Linear(192, 160) - ReLU - Linear(160, 192), top-1)", "Linear(192, 96)"],
                   "activation": "ReLU", "dense_psi": MOE_DENSE_PSI, "expert_psi_per_rank": MOE_EXPERT_PSI,
                   "psi_per_rank": MOE_DENSE_PSI + MOE_EXPERT_PSI}
# a model whose parameters straddle DeepSpeed's stage3_param_persistence_threshold (1e5 elements): the first
# weight above it, the second weight and both biases below; input and output sizes as LAYERS'
MIXED_LAYERS = [(128, 1024), (1024, 96)]
# six layers: 12 parameter tensors, more than a scalar's elements in clip_grad_norm_'s all-reduce of their
# norms
DEEP_LAYERS = [(128, 160), (160, 160), (160, 160), (160, 160), (160, 160), (160, 96)]
# widths no shard group divides (191 by 2 and 4, 150 by 4): FSDP2 pads each parameter's first dimension to a
# multiple of its shard ranks, so its calls carry more elements than the model has (input and output as
# LAYERS')
ODD_LAYERS = [(128, 191), (191, 150), (150, 96)]
# widths so narrow that padding them to a multiple of 4 adds a fifth to the model (9 -> 12, 5 -> 8)
NARROW_LAYERS = [(128, 9), (9, 5), (5, 96)]
# four Linears, the first three of one size (128 -> 128), as a model's equal blocks are: each its own FSDP2
# unit or ZeRO-3 module, the forward's first gathers alike back to back
EQUAL_LAYERS = [(128, 128), (128, 128), (128, 128), (128, 96)]
#: DDP's bucket_cap_mb in the bucket cases, under the model's size: DDP all-reduces every gradient in one
#: bucket until it rebuilds its buckets (torch/nn/parallel/distributed.py: no initial bucketing unless
#: find_unused_parameters), then in buckets of about this many MiB (one closes once it holds as much) in the
#: order the gradients became ready.
DDP_SMALL_BUCKET_MB = 0.1
# one tensor-parallel rank's parameters: half of layers.0 (by outputs), half of layers.1's weight (by
# inputs) and its whole bias, layers.2 whole
TP2_PSI_PER_RANK = (LAYERS[0][0] * LAYERS[0][1] // 2 + LAYERS[0][1] // 2 + LAYERS[0][1] // 2 * LAYERS[1][1]
                    + LAYERS[1][1] + LAYERS[2][0] * LAYERS[2][1] + LAYERS[2][1])
#: fsdp2-tp2-sp-norm's parameters a rank holds: the norm's weight and bias whole (replicated on tp), half of
#: each Linear's outputs (layers.0, layers.2: ColwiseParallel, with their biases) or inputs (layers.1:
#: RowwiseParallel, its bias whole)
NORM_TP2_PSI_PER_RANK = (2 * LAYERS[0][0] + LAYERS[0][0] * LAYERS[0][1] // 2 + LAYERS[0][1] // 2
                         + LAYERS[1][0] // 2 * LAYERS[1][1] + LAYERS[1][1]
                         + LAYERS[2][0] * LAYERS[2][1] // 2 + LAYERS[2][1] // 2)
#: tp4-block-ga2's layers: a block 192 → 384 → 192 between two whole layers, as a transformer's MLP
TP_BLOCK_LAYERS = [(128, 192), (192, 384), (384, 192), (192, 96)]
#: the layers the frozen cases freeze, and the parameters left to train (layers.1's)
FROZEN = (0, 2)
PSI_TRAINED = LAYERS[1][0] * LAYERS[1][1] + LAYERS[1][1]
#: the LoRA cases' rank, and their trained parameters (the adapters: r·(in + out) a Linear)
LORA_R = 4
PSI_LORA = sum(LORA_R * (i + o) for i, o in LAYERS)
CASES = {
    # name: (function(outdir), what ran: the facts the run was configured with)
    "tp2-dp2": (case_tp2_dp2, {
        "scheme": "tensor parallelism 2 (Megatron's MLP split: layers.0 by outputs, layers.1 by inputs, "
                  "layers.2 whole) x data parallelism 2 (one all-reduce a gradient tensor)",
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"tp": [[0, 1], [2, 3]], "dp": [[0, 2], [1, 3]]},
        "psi_per_rank": TP2_PSI_PER_RANK,
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "tp2-dp4": (lambda o: case_tp2_dp2(o, dp=4, steps=2), {
        "scheme": "tp2-dp2's Megatron MLP split by hand on 8 ranks: tensor parallelism 2 (consecutive "
                  "ranks) x data parallelism 4 (the even and the odd ranks), each rank's gradients "
                  "all-reduced over its data-parallel group, one call a tensor",
        "world_size": 8, "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"tp": [[0, 1], [2, 3], [4, 5], [6, 7]], "dp": [[0, 2, 4, 6], [1, 3, 5, 7]]},
        "psi_per_rank": TP2_PSI_PER_RANK,
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 2}),
    "tp4": (case_tp, {
        "scheme": "tensor parallelism 4 alone (parallelize_module on a 1-D DeviceMesh: layers.0 "
                  "ColwiseParallel, layers.1 RowwiseParallel, layers.2 whole), no data parallelism",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"tp": WORLD4},
        "micro_batches": 1, "grad_sync": "none (no data parallelism)", "steps_profiled": 3}),
    "tp4-first-whole-ga2": (lambda o: case_tp(o, k=2, first_whole=True), {
        "scheme": "tensor parallelism 4 alone (parallelize_module on a 1-D DeviceMesh: layers.0 whole, "
                  "layers.1 ColwiseParallel, layers.2 RowwiseParallel), no data parallelism, 2 micro-batches "
                  "an optimizer step",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"tp": WORLD4},
        "micro_batches": 2, "grad_sync": "none (no data parallelism)", "steps_profiled": 3}),
    "tp4-block-ga2": (lambda o: case_tp(o, k=2, first_whole=True, layers=TP_BLOCK_LAYERS), {
        "scheme": "tensor parallelism 4 alone (parallelize_module on a 1-D DeviceMesh) on Linear(128,192) "
                  "- Linear(192,384) - Linear(384,192) - Linear(192,96): layers.1 ColwiseParallel and "
                  "layers.2 RowwiseParallel, a transformer MLP block's split (its input and output 192 "
                  "wide), the others whole; no data parallelism, 2 micro-batches an optimizer step",
        "layers": TP_BLOCK_LAYERS,
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"tp": WORLD4},
        "micro_batches": 2, "grad_sync": "none (no data parallelism)", "steps_profiled": 3}),
    "tp4-sp": (case_tp_sp, {
        "scheme": "tensor parallelism 4 with sequence parallelism, no data parallelism (parallelize_module "
                  "on a 1-D DeviceMesh: layers.0 RowwiseParallel(input_layouts=Replicate(), "
                  "output_layouts=Shard(0)), layers.1 ColwiseParallel(input_layouts=Shard(0)), layers.2 "
                  "RowwiseParallel())",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"tp": WORLD4},
        "micro_batches": 1, "grad_sync": "none (no data parallelism)", "steps_profiled": 3}),
    "fsdp2-tp2": (case_fsdp2_tp2, {
        "scheme": "FSDP2 fully_shard per Linear + root on the dp dimension of a 2 x 2 DeviceMesh, PyTorch "
                  "tensor parallelism (layers.0 ColwiseParallel, layers.1 RowwiseParallel) on its tp "
                  "dimension",
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": [[0, 2], [1, 3]], "tp": [[0, 1], [2, 3]]},
        "psi_per_rank": TP2_PSI_PER_RANK,
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp2-tp2-sp": (lambda o: case_fsdp2_tp2(o, sequence_parallel=True), {
        "scheme": "as fsdp2-tp2, with sequence parallelism: layers.0 "
                  "ColwiseParallel(input_layouts=Shard(0)), layers.1 "
                  "RowwiseParallel(output_layouts=Shard(0)), each tensor-parallel rank half the "
                  "micro-batch's samples",
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": [[0, 2], [1, 3]], "tp": [[0, 1], [2, 3]]},
        "psi_per_rank": TP2_PSI_PER_RANK,
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp2-tp2-sp-norm": (case_fsdp2_tp2_sp_norm, {
        "scheme": "FSDP2 fully_shard (the norm, each Linear, the root) on the dp dimension of a 2 x 2 "
                  "DeviceMesh, tensor and sequence parallelism on its tp dimension as torchtitan's plan: "
                  "LayerNorm(128) SequenceParallel(sequence_dim=0), layers.0 "
                  "ColwiseParallel(input_layouts=Shard(0)), layers.1 "
                  "RowwiseParallel(output_layouts=Shard(0)), layers.2 "
                  "ColwiseParallel(input_layouts=Shard(0), output_layouts=Replicate())",
        "norm": "LayerNorm(128) before layers.0 (weight and bias: 256 parameters)",
        "psi_with_norm": sum(i * o + o for i, o in LAYERS) + 2 * LAYERS[0][0],
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": [[0, 2], [1, 3]], "tp": [[0, 1], [2, 3]]},
        "psi_per_rank": NORM_TP2_PSI_PER_RANK,
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "pp2-dp2": (case_pp2_dp2, {
        "scheme": "pipeline parallelism 2 (GPipe order, send/recv between ranks r and r + 2) x "
                  "data parallelism 2 (one all-reduce a gradient tensor)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": [[0, 1], [2, 3]]},
        "pipeline": {"stages": [[0, 1], [2, 3]], "layers": [[0, 1], [2]],
                     "psi_per_stage": [LAYERS[0][0] * LAYERS[0][1] + LAYERS[0][1]
                                       + LAYERS[1][0] * LAYERS[1][1] + LAYERS[1][1],
                                       LAYERS[2][0] * LAYERS[2][1] + LAYERS[2][1]]},
        "micro_batches": PP_MICRO_BATCHES, "grad_sync": "once, after the last micro-batch's backward",
        "steps_profiled": 3}),
    "pp2-fsdp2": (case_pp2_fsdp2, {
        "scheme": "PyTorch pipeline parallelism 2 (torch.distributed.pipelining, ScheduleGPipe) x FSDP2 "
                  "2 (fully_shard per Linear + the stage, on the dp dimension of a 2 x 2 DeviceMesh)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"pp": [[0, 2], [1, 3]],
                                                                         "dp": [[0, 1], [2, 3]]},
        "pipeline": {"stages": [[0, 1], [2, 3]], "layers": [[0, 1], [2]],
                     "psi_per_stage": [LAYERS[0][0] * LAYERS[0][1] + LAYERS[0][1]
                                       + LAYERS[1][0] * LAYERS[1][1] + LAYERS[1][1],
                                       LAYERS[2][0] * LAYERS[2][1] + LAYERS[2][1]]},
        "micro_batches": PP_MICRO_BATCHES,
        "grad_sync": "once, after the last micro-batch's backward (the schedule's)", "steps_profiled": 3}),
    "pp2-fsdp2-1f1b-ga4": (lambda o: case_pp2_fsdp2_schedule(o, "1F1B", 4), {
        "scheme": "PyTorch pipeline parallelism 2 (torch.distributed.pipelining, Schedule1F1B, 4 "
                  "micro-batches) x FSDP2 2 (fully_shard per Linear + the stage, on the dp dimension of a "
                  "2 x 2 DeviceMesh)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"pp": [[0, 2], [1, 3]],
                                                                         "dp": [[0, 1], [2, 3]]},
        "pipeline": {"schedule": "Schedule1F1B", "stages": [[0, 1], [2, 3]], "layers": [[0, 1], [2]],
                     "psi_per_stage": [LAYERS[0][0] * LAYERS[0][1] + LAYERS[0][1]
                                       + LAYERS[1][0] * LAYERS[1][1] + LAYERS[1][1],
                                       LAYERS[2][0] * LAYERS[2][1] + LAYERS[2][1]]},
        "micro_batches": 4,
        "grad_sync": "once, after the last micro-batch's backward (the schedule's)", "steps_profiled": 2}),
    "pp2-fsdp2-interleaved-1f1b-ga4": (case_pp2_fsdp2_interleaved, {
        "scheme": "PyTorch interleaved pipeline parallelism (torch.distributed.pipelining, "
                  "ScheduleInterleaved1F1B, 4 micro-batches): 4 stages, 2 a rank of pp 2, x FSDP2 2 "
                  "(fully_shard per Linear + each stage, on the dp dimension of a 2 x 2 DeviceMesh)",
        "layers": DEEP_LAYERS,
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"pp": [[0, 2], [1, 3]],
                                                                         "dp": [[0, 1], [2, 3]]},
        "pipeline": {"schedule": "ScheduleInterleaved1F1B",
                     "stages": [[0, 1], [2, 3], [0, 1], [2, 3]],
                     "layers": [list(range(INTERLEAVED_BOUNDS[s], INTERLEAVED_BOUNDS[s + 1]))
                                for s in range(4)],
                     "psi_per_pp_rank": [sum(i * o + o for i, o in DEEP_LAYERS[INTERLEAVED_BOUNDS[s]:
                                                                               INTERLEAVED_BOUNDS[s + 1]])
                                      + sum(i * o + o for i, o in DEEP_LAYERS[INTERLEAVED_BOUNDS[s + 2]:
                                                                               INTERLEAVED_BOUNDS[s + 3]])
                                      for s in range(2)]},
        "micro_batches": 4,
        "grad_sync": "once, after the last micro-batch's backward (the schedule's)", "steps_profiled": 2}),
    "pp2-fsdp2-tp2": (case_pp2_fsdp2_tp2, {
        "scheme": "3-D: pipeline parallelism 2 (torch.distributed.pipelining, ScheduleGPipe) x FSDP2 2 "
                  "(fully_shard per Linear + the stage) x tensor parallelism 2 in stage 0 (layers.0 "
                  "ColwiseParallel, layers.1 RowwiseParallel) on a 2 x 2 x 2 DeviceMesh (pp, dp, tp)",
        "world_size": 8, "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"pp": [[0, 4], [1, 5], [2, 6], [3, 7]], "dp": [[0, 2], [1, 3], [4, 6], [5, 7]],
                   "tp": [[0, 1], [2, 3], [4, 5], [6, 7]]},
        "pipeline": {"stages": [[0, 1, 2, 3], [4, 5, 6, 7]], "layers": [[0, 1], [2]],
                     "psi_per_stage_rank": [TP2_PSI_PER_RANK - LAYERS[2][0] * LAYERS[2][1] - LAYERS[2][1],
                                            LAYERS[2][0] * LAYERS[2][1] + LAYERS[2][1]]},
        "micro_batches": PP_MICRO_BATCHES,
        "grad_sync": "once, after the last micro-batch's backward (the schedule's)", "steps_profiled": 2}),
    "hsdp-2x2-tp2": (case_hsdp_tp, {
        "scheme": "HSDP (FSDP2 on replicate 2 x shard 2) beside tensor parallelism 2 (layers.0 "
                  "ColwiseParallel, layers.1 RowwiseParallel) on a 2 x 2 x 2 DeviceMesh",
        "world_size": 8, "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"replicate": [[0, 4], [1, 5], [2, 6], [3, 7]], "shard": [[0, 2], [1, 3], [4, 6], [5, 7]],
                   "tp": [[0, 1], [2, 3], [4, 5], [6, 7]]},
        "psi_per_rank": TP2_PSI_PER_RANK,
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 2}),
    "ddp-eval-only": (case_ddp_eval_only, {
        "scheme": "DDP's model evaluated only: forward under torch.no_grad(), a loss and a metric "
                  "all-reduced (1 element each) a batch; no optimizer step", "param_dtype": "float32",
        "reduce_dtype": "float32", "groups": {"dp": WORLD4}, "micro_batches": 1,
        "grad_sync": "none (no backward)", "steps_profiled": 3, "profiler_step_per": "evaluation batch"}),
    "fsdp2-eval-every-2": (case_fsdp2_eval_every, fsdp2_evaluation_facts(2, 4)),
    "fsdp2-eval-every-3": (lambda o: case_fsdp2_eval_every(o, every=3, steps=6),
                           fsdp2_evaluation_facts(3, 6)),
    "fsdp2-one-evaluation": (lambda o: case_fsdp2_eval_every(o, every=3, steps=4),
                             fsdp2_evaluation_facts(3, 4, ": 4 steps profiled, one evaluation among them")),
    "fsdp2-eval-own-steps": (case_fsdp2_eval_own_steps, {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True; two optimizer steps, "
                  "then an evaluation of 2 batches (a 16-element loss all-reduce each) in a ProfilerStep of "
                  "its own, 3 times",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 9,
        "evaluation_steps": [3, 6, 9]}),
    "fsdp2-mixed-bf16-fp32": (case_fsdp2_mixed, {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True",
        "param_dtype": "bfloat16", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "hsdp-2x2": (lambda o: case_fsdp2(o, mesh_shape=(2, 2), mesh_names=("replicate", "shard")), {
        "scheme": "HSDP: FSDP2 fully_shard on a 2-D DeviceMesh (replicate 2 x shard 2), per Linear + root",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((2, 2)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "hsdp-4x1": (lambda o: case_fsdp2(o, mesh_shape=(4, 1), mesh_names=("replicate", "shard")), {
        "scheme": "HSDP on a DeviceMesh of replicate 4 x shard 1 (FSDP2 fully_shard): every parameter whole "
                  "on each rank, the gradients all-reduced on the replicate dimension, the world's group",
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"replicate": WORLD4, "shard": [[0], [1], [2], [3]]}, "micro_batches": 1,
        "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "hsdp-2x2-ga4-all-reduce-last": hsdp_all_reduce_last_case(4),
    "hsdp-2x2-ga2-all-reduce-last": hsdp_all_reduce_last_case(2),
    "hsdp-2x2-metrics-all-reduce": (case_hsdp_metrics, {
        "scheme": "HSDP as hsdp-2x2, one micro-batch, and after each optimizer step the 8 per-sample losses "
                  "(padded to 16 elements) all-reduced over the world",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((2, 2)),
        "micro_batches": 1, "steps_profiled": 2, "grad_sync": "every micro-batch"}),
    "hsdp-2x4-mixed-bf16-fp32-ga2": (
        case_hsdp_2x4_mixed, {
            "scheme": "HSDP on 8 ranks: FSDP2 fully_shard on a 2-D DeviceMesh (replicate 2 x shard 4), per "
                      "Linear + root, bf16 parameters and fp32 gradient reductions, 2 micro-batches, "
                      "set_requires_gradient_sync(False) on the first",
            "world_size": 8, "param_dtype": "bfloat16", "reduce_dtype": "float32",
            "groups": fsdp_groups((2, 4)), "micro_batches": 2, "steps_profiled": 2,
            "grad_sync": "once, in the last micro-batch"}),
    "hsdp-2x4-mixed-bf16-fp32-ga2-log-loss": (
        lambda o: case_hsdp_2x4_mixed(o, log_loss=True), {
            "scheme": "hsdp-2x4-mixed-bf16-fp32-ga2, and after each optimizer step the step's last loss "
                      "all-reduced over the world (one element)",
            "world_size": 8, "param_dtype": "bfloat16", "reduce_dtype": "float32",
            "groups": fsdp_groups((2, 4)), "micro_batches": 2, "steps_profiled": 2,
            "grad_sync": "once, in the last micro-batch"}),
    "ddp-subgroup-dp2-of-4": (case_ddp_subgroup, {
        "scheme": "DDP on a data-parallel sub-group of 2 in a world of 4 (as under TP=2)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": [[0, 2], [1, 3]]},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "ddp-bf16": (lambda o: case_ddp(o, dtype=torch.bfloat16), {
        "scheme": "DDP on a bfloat16 model (gradients all-reduced in bfloat16)",
        "param_dtype": "bfloat16", "reduce_dtype": "bfloat16", "groups": {"dp": WORLD4},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "ddp-6-layers-find-unused": (lambda o: case_ddp(o, layers=DEEP_LAYERS, find_unused_parameters=True), {
        "scheme": "DDP with find_unused_parameters=True (as Hugging Face Trainer sets it without gradient "
                  "checkpointing) on 6 layers (12 parameter tensors)", "layers": DEEP_LAYERS,
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "ddp-profiler-windows": (case_ddp_profiler_windows, {
        "scheme": "DDP, profiled by a schedule that repeats (wait 1 / warm-up 1 / active 2, repeat 2) "
                  "through tensorboard_trace_handler: two files a rank, steps 2-3 and 6-7",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 4,
        "schedule": {"wait": 1, "warmup": 1, "active": 2, "repeat": 2}}),
    "ddp-no-record-shapes": (lambda o: case_ddp(o, record_shapes=False), {
        "scheme": "DDP, profiled without record_shapes (the profiler's default): no sizes in the trace",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4}, "record_shapes": False,
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "ddp-buckets-from-first-step": (
        lambda o: case_ddp(o, layers=DEEP_LAYERS, warmup=0, bucket_cap_mb=DDP_SMALL_BUCKET_MB), {
            "scheme": f"DDP with bucket_cap_mb {DDP_SMALL_BUCKET_MB} on 6 layers, profiled from its first "
                      "optimizer step (no warm-up step)", "layers": DEEP_LAYERS, "warmup": 0,
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
            "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "ddp-static-graph-buckets": (
        lambda o: case_ddp(o, static_graph=True, bucket_cap_mb=DDP_SMALL_BUCKET_MB), {
            "scheme": f"DDP with static_graph=True and bucket_cap_mb {DDP_SMALL_BUCKET_MB}",
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
            "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "ddp-16-ranks-loss-gather": (case_ddp_loss_gather, {
        "scheme": "DDP on 16 ranks, the loss gathered from every rank after each step "
                  "(all_gather_into_tensor of one element a rank, as Hugging Face Trainer's _nested_gather "
                  "logs it)", "world_size": 16,
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": [list(range(16))]},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "ddp-zero-ro-fp16-hook": (case_ddp_zero_ro_fp16_hook, {
        "scheme": "DDP with fp16_compress_hook + ZeroRedundancyOptimizer(Adam)",
        "param_dtype": "float32", "reduce_dtype": "float16", "groups": {"dp": WORLD4},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "ddp-powersgd-rank1": (case_ddp_powersgd, {
        "scheme": "DDP with PowerSGD's comm hook (powerSGD_hook, matrix_approximation_rank 1, "
                  "start_powerSGD_iter 2: the 2 warm-up steps reduce whole buckets, the profiled ones "
                  "the biases and the rank-1 factors P (out x 1) and Q (in x 1) of each weight)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3, "warmup": 2,
        "reduced_per_step": POWERSGD_RANK1_REDUCED}),
    "ddp-powersgd-rank1-ga4-no-sync": (lambda o: case_ddp_powersgd(o, k=4), {
        "scheme": "DDP with PowerSGD's comm hook (powerSGD_hook, matrix_approximation_rank 1, "
                  "start_powerSGD_iter 2), 4 micro-batches a step, the first 3 in no_sync(): the last one's "
                  "gradients compressed as in ddp-powersgd-rank1",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 4, "grad_sync": "last micro-batch (no_sync)", "steps_profiled": 3, "warmup": 2,
        "reduced_per_step": POWERSGD_RANK1_REDUCED}),
    "ddp-post-local-sgd-2x2": (case_ddp_post_local_sgd, {
        "scheme": "post-local SGD: DDP with post_localSGD_hook (start_localSGD_iter 2: the gradients "
                  "all-reduced within subgroups of 2 ranks, [0, 1] and [2, 3]) and "
                  "PeriodicModelAverager(period 2, warmup_steps 2): the parameters all-reduced over the 4 "
                  "ranks after the optimizer's step every 2 steps",
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"gradients (subgroups)": [[0, 1], [2, 3]], "averaging (world)": WORLD4},
        "micro_batches": 1, "grad_sync": "every micro-batch, within the subgroup", "steps_profiled": 4,
        "warmup": 2, "averaged_in_profiled_steps": [2, 4]}),
    "ddp-periodic-averager": (lambda o: case_ddp_post_local_sgd(o, local=False), {
        "scheme": "DDP (gradients all-reduced over the 4 ranks) with PeriodicModelAverager(period 2, "
                  "warmup_steps 2) and no post_localSGD_hook: the parameters, equal already, all-reduced "
                  "over the 4 ranks after the optimizer's step every 2 steps",
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4, "averaging (world)": WORLD4},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 4,
        "warmup": 2, "averaged_in_profiled_steps": [2, 4]}),
    "ds-zero1-ga4": (lambda o: case_deepspeed(o, ds_config(1)), {
        "scheme": "DeepSpeed ZeRO stage 1", "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4}, "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_config(1)}),
    "ds-zero2-ga4": (lambda o: case_deepspeed(o, ds_config(2)), {
        "scheme": "DeepSpeed ZeRO stage 2", "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4}, "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_config(2)}),
    "ds-zero3-ga4": (lambda o: case_deepspeed(o, ds_config(3)), {
        "scheme": "DeepSpeed ZeRO stage 3", "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4}, "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_config(3)}),
    "ds-zero3-ga4-eval-every-2": (
        lambda o: case_deepspeed(o, ds_config(3), steps=4, evaluate_every=2), {
        "scheme": "DeepSpeed ZeRO stage 3; after every 2nd optimizer step (0, 2, 4), inside its "
                  "ProfilerStep, an evaluation of 2 batches (a 16-element loss all-reduce each)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": DS_GA, "steps_profiled": 4, "deepspeed_config": ds_config(3)}),
    "ds-zero3-ga4-step-per-micro-batch-eval-every-2": (
        lambda o: case_deepspeed(o, ds_config(3), steps=4, step_per_micro_batch=True, evaluate_every=2), {
            "scheme": "DeepSpeed ZeRO stage 3, engine.step() then prof.step() every micro-batch; after "
                      "every 2nd optimizer step (2, 4), inside its last micro-batch's ProfilerStep, an "
                      "evaluation of 2 batches (a 16-element loss all-reduce each)",
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
            "micro_batches": DS_GA, "steps_profiled": 4 * DS_GA, "profiler_step_per": "micro-batch",
            "deepspeed_config": ds_config(3)}),
    "ds-zero3-ga4-from-first-step": (lambda o: case_deepspeed(o, ds_config(3), steps=3, warmup=0), {
        "scheme": "DeepSpeed ZeRO stage 3, profiled from its first optimizer step (no warm-up step)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4}, "warmup": 0,
        "micro_batches": DS_GA, "steps_profiled": 3, "deepspeed_config": ds_config(3)}),
    "ds-zero3-from-first-step": (lambda o: case_deepspeed(o, ds_config(3, ga=1), steps=3, warmup=0), {
        "scheme": "DeepSpeed ZeRO stage 3, one micro-batch a step, profiled from its first optimizer step "
                  "(no warm-up step)", "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4}, "warmup": 0, "micro_batches": 1, "steps_profiled": 3,
        "deepspeed_config": ds_config(3, ga=1)}),
    "ds-zero3-ga4-reuse0-prefetch0": (lambda o: case_deepspeed(o, ds_config(3, 0, 0)), {
        "scheme": "DeepSpeed ZeRO stage 3, stage3_max_reuse_distance 0, stage3_prefetch_bucket_size 0",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_config(3, reuse_distance=0, prefetch=0)}),
    "ds-zero3-reuse0-reentrant-checkpoint": (
        lambda o: case_deepspeed(o, ds_config(3, 0, 0, ga=1), checkpointed=(1,)), {
        "scheme": "DeepSpeed ZeRO stage 3, stage3_max_reuse_distance 0, stage3_prefetch_bucket_size 0, "
                  "layers.1 under torch.utils.checkpoint.checkpoint(use_reentrant=True)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 1, "steps_profiled": 2, "checkpointed": ["layers.1"],
        "deepspeed_config": ds_config(3, reuse_distance=0, prefetch=0, ga=1)}),
    "ds-zero3-defaults-ga4": (lambda o: case_deepspeed(o, ds_default_config(3)), {
        "scheme": "DeepSpeed ZeRO stage 3 with DeepSpeed's defaults (every parameter persistent: fewer than "
                  "stage3_param_persistence_threshold = 1e5 elements)", "param_dtype": "float32",
        "reduce_dtype": "float32", "groups": {"dp": WORLD4}, "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_default_config(3)}),
    "ds-zero3-defaults-mixed-ga4": (
        lambda o: case_deepspeed(o, ds_default_config(3), layers=MIXED_LAYERS), {
            "scheme": "DeepSpeed ZeRO stage 3 with DeepSpeed's defaults on a model of Linear(128, 1024) - "
                      "ReLU - Linear(1024, 96): layers.0's weight (131,072 elements) partitioned, the rest "
                      "(98,304 + 1,024 + 96 = 99,424 elements) persistent (at most "
                      "stage3_param_persistence_threshold = 1e5 each)",
            "layers": MIXED_LAYERS, "param_dtype": "float32", "reduce_dtype": "float32",
            "groups": {"dp": WORLD4}, "micro_batches": DS_GA, "steps_profiled": 2,
            "deepspeed_config": ds_default_config(3)}),
    "ds-zero3-hpz2-ga4": (lambda o: case_deepspeed(o, ds_config(3, hpz=2)), {
        "scheme": "DeepSpeed ZeRO stage 3 with ZeRO++ hpZ (zero_hpz_partition_size 2)",
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4, "hpz": [[0, 1], [2, 3]]}, "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_config(3, hpz=2)}),
    "fsdp2-expert-parallel-2": (case_fsdp2_expert_parallel, {
        "scheme": f"FSDP2 with expert parallelism {MOE_EP} (torchtitan's composition): {MOE_EXPERTS} "
                  "experts, each rank's 2 fully_shard on its group of 2 holding the same experts, the dense "
                  "layers and the root (the gate) on 4, tokens by all_to_all_single on the expert-parallel "
                  "group",
        "model": {"layers": ["Linear(128, 192)", "MoE(gate Linear(192, 4, bias=False), 4 experts of "
                             "Linear(192, 160) - ReLU - Linear(160, 192), top-1, 8 slots an expert)",
                             "Linear(192, 96)"],
                  "activation": "ReLU", "dense_psi": MOE_DENSE_PSI, "expert_psi_per_rank": MOE_EXPERT_PSI,
                  "psi_per_rank": MOE_DENSE_PSI + MOE_EXPERT_PSI},
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4, "efsdp": [[0, 2], [1, 3]], "ep": [[0, 1], [2, 3]]},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 2}),
    "ds-pipe2-dp2-zero1-ga4": (case_deepspeed_pipeline, {
        "scheme": "DeepSpeed's pipeline engine (PipelineModule, 2 stages, partition_method 'parameters': "
                  "layers.0 | layers.1, layers.2) x data parallelism 2, ZeRO stage 1, engine.train_batch",
        "param_dtype": "float32", "reduce_dtype": "float32",
        # the grid's groups (deepspeed/runtime/pipe/topology.py PipelineParallelGrid): data-parallel; pipe
        # (also its model group and point-to-point pairs, the same ranks); tensor slicing, each rank alone
        "groups": {"dp": [[0, 1], [2, 3]], "pipe": [[0, 2], [1, 3]], "slice": [[0], [1], [2], [3]]},
        "pipeline": {"stages": [[0, 1], [2, 3]], "psi_per_stage": [LAYERS[0][0] * LAYERS[0][1] + LAYERS[0][1],
                                                                 sum(i * o + o for i, o in LAYERS[1:])]},
        "micro_batches": DS_GA, "grad_sync": "once, after the last micro-batch (the pipeline engine's)",
        "steps_profiled": 2,
        "deepspeed_config": {"train_micro_batch_size_per_gpu": MICRO_BATCH,
                             "gradient_accumulation_steps": DS_GA, "zero_optimization": {"stage": 1},
                             "steps_per_print": 1_000_000}}),
    "ds-moe-ep2-zero2-ga4": (lambda o: case_deepspeed_moe(o, ds_config(2)), {
        "scheme": f"DeepSpeed ZeRO stage 2 with a DeepSpeed MoE layer of {MOE_EXPERTS} experts, expert "
                  f"parallelism {MOE_EP}: the dense parameters (l0, the gate, l2) data-parallel on 4, each "
                  "rank's 2 experts on its expert-data-parallel group of 2",
        "model": MOE_MODEL,
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4, "expert_parallel": [[0, 1], [2, 3]],
                   "expert_data_parallel": [[0, 2], [1, 3]]},
        "micro_batches": DS_GA, "steps_profiled": 2, "deepspeed_config": ds_config(2)}),
    "ds-zero1-ga4-6-layers-small-buckets": (
        lambda o: case_deepspeed(o, ds_config(1, bucket=20_000), layers=DEEP_LAYERS), {
            "scheme": "DeepSpeed ZeRO stage 1 on 6 layers, reduce_bucket_size and allgather_bucket_size "
                      "20,000 elements: at the boundary the gradients are all-reduced in 11 buckets, 4 of "
                      "them the equal layers' 160-element biases and 3 their 25,600-element weights",
            "layers": DEEP_LAYERS, "param_dtype": "float32", "reduce_dtype": "float32",
            "groups": {"dp": WORLD4}, "micro_batches": DS_GA, "grad_sync": "boundary", "steps_profiled": 2,
            "deepspeed_config": ds_config(1, bucket=20_000)}),
    "ds-moe-ep2-zero2-ga4-small-buckets": (lambda o: case_deepspeed_moe(o, ds_config(2, bucket=20_000)), {
        "scheme": "as ds-moe-ep2-zero2-ga4 with reduce_bucket_size and allgather_bucket_size 20,000 "
                  "elements: each micro-batch all-reduces the dense gradients in 4 buckets on the group of 4 "
                  "and the experts' in 8 on the expert-data-parallel group of 2",
        "model": MOE_MODEL, "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4, "expert_parallel": [[0, 1], [2, 3]],
                   "expert_data_parallel": [[0, 2], [1, 3]]},
        "micro_batches": DS_GA, "steps_profiled": 2, "deepspeed_config": ds_config(2, bucket=20_000)}),
    "ds-zero2-ga4-step-per-micro-batch": (
        lambda o: case_deepspeed(o, ds_config(2), steps=3, step_per_micro_batch=True), {
            "scheme": "DeepSpeed ZeRO stage 2, engine.step() then prof.step() every micro-batch",
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
            "micro_batches": DS_GA, "steps_profiled": 3 * DS_GA, "profiler_step_per": "micro-batch"}),
    "ds-zero1-ga4-step-per-micro-batch": (
        lambda o: case_deepspeed(o, ds_config(1), steps=3, step_per_micro_batch=True), {
            "scheme": "DeepSpeed ZeRO stage 1, engine.step() then prof.step() every micro-batch",
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
            "micro_batches": DS_GA, "steps_profiled": 3 * DS_GA, "profiler_step_per": "micro-batch"}),
    "ddp-ga4-no-sync-step-per-micro-batch": (case_ddp_step_per_micro_batch, {
        "scheme": "DDP, no_sync() on the first 3 of 4 micro-batches, prof.step() every micro-batch",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 4, "grad_sync": "last micro-batch only (no_sync() on the first 3)",
        "warmup": 4, "steps_profiled": 12, "profiler_step_per": "micro-batch"}),
    "ds-zero2-ga4-bf16": (lambda o: case_deepspeed(o, ds_config(2, bf16=True)), {
        "scheme": "DeepSpeed ZeRO stage 2, bf16 enabled", "param_dtype": "bfloat16",
        "reduce_dtype": "bfloat16 (DeepSpeed's default communication_data_type for bf16)",
        "groups": {"dp": WORLD4}, "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_config(2, bf16=True)}),
    "ds-zero1-ga4-bf16": (lambda o: case_deepspeed(o, ds_config(1, bf16=True)), {
        "scheme": "DeepSpeed ZeRO stage 1, bf16 enabled (DeepSpeed's BF16_Optimizer: fp32 gradient "
                  "accumulation, the gradients all-reduced in bf16 at the boundary)",
        "param_dtype": "bfloat16",
        "reduce_dtype": "bfloat16 (DeepSpeed's default communication_data_type for bf16)",
        "groups": {"dp": WORLD4}, "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_config(1, bf16=True)}),
    "ds-zero2-ga4-comm-bf16": ds_comm_bf16_case(2, "all-reduced in bf16, the updated parameters"),
    "ds-zero3-ga4-comm-bf16": ds_comm_bf16_case(3, "reduce-scattered in bf16, the parameters"),
    "ds-zero2-offload-ga4": (lambda o: case_deepspeed(o, ds_config(2, offload=("optimizer",))), {
        "scheme": "DeepSpeed ZeRO stage 2 with ZeRO-Offload (optimizer states in host memory)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_config(2, offload=("optimizer",))}),
    "ds-zero3-offload-ga4": (lambda o: case_deepspeed(o, ds_config(3, offload=("optimizer", "param"))), {
        "scheme": "DeepSpeed ZeRO stage 3 with ZeRO-Offload (optimizer states and parameters in host memory)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_config(3, offload=("optimizer", "param"))}),
    "ds-zero2-ga4-small-buckets": (lambda o: case_deepspeed(o, ds_config(2, bucket=20_000)), {
        "scheme": "DeepSpeed ZeRO stage 2, reduce_bucket_size and allgather_bucket_size 20,000 elements: "
                  "each micro-batch all-reduces its gradients in 5 buckets (15,616, 28,560, 2,160, 192 and "
                  "24,576 elements), the last ones small beside the step, as a large model's last bucket is",
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4}, "micro_batches": DS_GA, "steps_profiled": 2,
        "deepspeed_config": ds_config(2, bucket=20_000)}),
    "fsdp2-ga4-sync-every": (lambda o: case_fsdp2(o, k=4, sync_every=True, steps=2), {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 4, "grad_sync": "every micro-batch", "steps_profiled": 2}),
    "fsdp2-6-layers-ga4-clip": (lambda o: case_fsdp2(o, k=4, sync_every=True, steps=2, max_norm=1.0,
                                                      layers=DEEP_LAYERS), {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True, on 6 layers (12 "
                  "parameter tensors); gradients clipped (clip_grad_norm_, max_norm 1.0, torchtitan's "
                  "default) before each optimizer step", "layers": DEEP_LAYERS,
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 4, "grad_sync": "every micro-batch", "steps_profiled": 2}),
    "hsdp-2x2-6-layers-ga2-clip": (
        lambda o: case_fsdp2(o, mesh_shape=(2, 2), mesh_names=("replicate", "shard"), k=2, sync_every=True,
                             steps=2, max_norm=1.0, layers=DEEP_LAYERS), {
            "scheme": "HSDP (FSDP2 on replicate 2 x shard 2) on 6 layers, 2 micro-batches each reducing its "
                      "gradients, clipped (clip_grad_norm_, max_norm 1.0) before each optimizer step",
            "layers": DEEP_LAYERS, "param_dtype": "float32", "reduce_dtype": "float32",
            "groups": fsdp_groups((2, 2)), "micro_batches": 2, "grad_sync": "every micro-batch",
            "steps_profiled": 2}),
    "fsdp2-checkpoint-every-2": (case_fsdp2_checkpoint, {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True; a checkpoint saved "
                  "(torch.distributed.checkpoint.save of the model's state dict) after every 2nd optimizer "
                  "step, inside its ProfilerStep", "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": fsdp_groups((4,)), "micro_batches": 1, "grad_sync": "every micro-batch",
        "steps_profiled": 6}),
    "fsdp2-ga4-no-sync-keep-after-backward": (
        lambda o: case_fsdp2(o, k=4, sync_every=False, steps=2, keep_after_backward=True), {
            "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True; "
                      "set_requires_gradient_sync(False) and set_reshard_after_backward(False) on the "
                      "first 3 of 4 micro-batches", "param_dtype": "float32", "reduce_dtype": "float32",
            "groups": fsdp_groups((4,)), "micro_batches": 4, "steps_profiled": 2,
            "grad_sync": "last micro-batch only (set_requires_gradient_sync(False) on the first 3)"}),
    "fsdp2-ga4-no-sync": (lambda o: case_fsdp2(o, k=4, sync_every=False, steps=2), {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 4, "steps_profiled": 2,
        "grad_sync": "last micro-batch only (set_requires_gradient_sync(False) on the first 3)"}),
    "fsdp1-root-holds-last": (lambda o: case_fsdp1(o, units=2, steps=2), {
        "scheme": "FSDP1 FULL_SHARD, units on layers.0 and layers.1, layers.2 in the root unit (not "
                  "resharded after forward)", "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": fsdp_groups((4,)), "micro_batches": 1, "grad_sync": "every micro-batch",
        "steps_profiled": 2, "root_unit_elements": LAYERS[2][0] * LAYERS[2][1] + LAYERS[2][1]}),
    "fsdp2-default-root-holds-last-ga4": (
        lambda o: case_fsdp2(o, reshard=None, units=2, k=4, sync_every=False, steps=2), {
            "scheme": "FSDP2 fully_shard on layers.0, layers.1 and the root (holding layers.2), "
                      "reshard_after_forward left at its default (True, but the root's parameters are not "
                      "resharded after forward)", "param_dtype": "float32", "reduce_dtype": "float32",
            "groups": fsdp_groups((4,)), "micro_batches": 4, "steps_profiled": 2,
            "grad_sync": "last micro-batch only (set_requires_gradient_sync(False) on the first 3)",
            "root_unit_elements": LAYERS[2][0] * LAYERS[2][1] + LAYERS[2][1]}),
    "hsdp-2x2-no-reshard": (
        lambda o: case_fsdp2(o, mesh_shape=(2, 2), mesh_names=("replicate", "shard"), reshard=False), {
            "scheme": "HSDP: FSDP2 fully_shard on a 2-D DeviceMesh (replicate 2 x shard 2), per Linear + "
                      "root, reshard_after_forward=False (SHARD_GRAD_OP inside the shard group)",
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((2, 2)),
            "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp1-hybrid-zero2-2x2": (lambda o: case_fsdp1(o, "_HYBRID_SHARD_ZERO2"), {
        "scheme": "FSDP1 _HYBRID_SHARD_ZERO2 (SHARD_GRAD_OP inside the shard group), one unit per Linear + "
                  "root, process_group=(shard group of 2, replicate group of 2)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((2, 2)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp2-no-reshard": (lambda o: case_fsdp2(o, reshard=False, steps=2), {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=False (as ZeRO-2)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 2}),
    "fsdp2-odd-widths": (lambda o: case_fsdp2(o, layers=ODD_LAYERS), {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True, on layers of widths 191 "
                  "and 150, which 4 shard ranks do not divide: each parameter's first dimension padded to a "
                  "multiple of 4 (192, 152) in its all-gathers and reduce-scatters",
        "layers": ODD_LAYERS, "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp2-narrow-widths": (lambda o: case_fsdp2(o, layers=NARROW_LAYERS, steps=2), {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True, on layers of widths 9 "
                  "and 5: each parameter's first dimension padded to a multiple of 4 (12, 8), a fifth more "
                  "elements in its calls than the model has",
        "layers": NARROW_LAYERS, "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": fsdp_groups((4,)), "micro_batches": 1, "grad_sync": "every micro-batch",
        "steps_profiled": 2}),
    "fsdp2-equal-layers": (lambda o: case_fsdp2(o, layers=EQUAL_LAYERS, steps=2), {
        "scheme": "FSDP2 fully_shard per Linear + root (holding nothing), reshard_after_forward=True, on "
                  "three Linears of one size and a fourth: the step opens with three gathers alike",
        "layers": EQUAL_LAYERS, "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": fsdp_groups((4,)), "micro_batches": 1, "grad_sync": "every micro-batch",
        "steps_profiled": 2}),
    "fsdp2-equal-layers-ga2-no-sync": (
        lambda o: case_fsdp2(o, layers=EQUAL_LAYERS, k=2, sync_every=False, steps=2), {
        "scheme": "as fsdp2-equal-layers, 2 micro-batches a step",
        "layers": EQUAL_LAYERS, "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": fsdp_groups((4,)), "micro_batches": 2, "steps_profiled": 2,
        "grad_sync": "last micro-batch only (set_requires_gradient_sync(False) on the first)"}),
    "fsdp2-one-unit": (lambda o: case_fsdp2(o, units=0, steps=2), {
        "scheme": "FSDP2 fully_shard on the root alone (one unit: the whole model), "
                  "reshard_after_forward=True: gathered for the forward and again for the backward",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 2}),
    "ds-zero3-reuse0-equal-layers": (
        lambda o: case_deepspeed(o, ds_config(3, 0, 0, ga=1), layers=EQUAL_LAYERS), {
        "scheme": "DeepSpeed ZeRO stage 3, stage3_max_reuse_distance 0, stage3_prefetch_bucket_size 0, on "
                  "fsdp2-equal-layers' Linears", "layers": EQUAL_LAYERS,
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 1, "steps_profiled": 2,
        "deepspeed_config": ds_config(3, reuse_distance=0, prefetch=0, ga=1)}),
    "ds-zero3-past-reuse-distance-ga2": (
        lambda o: case_deepspeed(o, ds_config(3, ga=2, reuse_distance=10_000, prefetch=500, live=10_000)), {
        "scheme": "DeepSpeed ZeRO stage 3 at stage3_max_reuse_distance and stage3_max_live_parameters "
                  "10,000, stage3_prefetch_bucket_size 500 (a seventh and 1/140 of Ψ: the defaults as a "
                  "7e9-parameter model sees them), 2 micro-batches",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 2, "steps_profiled": 2,
        "deepspeed_config": ds_config(3, ga=2, reuse_distance=10_000, prefetch=500, live=10_000)}),
    "ds-zero3-gpt2-past-reuse-distance": (
        lambda o: case_ds_gpt2(o, ds_config(3, ga=1, **DS_AS_7B), **HF_GPT2_3), {
        "scheme": "DeepSpeed ZeRO stage 3 on transformers' GPT-2 (3 blocks, output layer untied) at "
                  "DeepSpeed's defaults scaled as a 7e9-parameter model sees them (DS_AS_7B: reuse distance "
                  "and live parameters 26,000, prefetch bucket 1,300 elements), 1 micro-batch",
        "model": {"gpt2_config": {**HF_GPT2, **HF_GPT2_3}, "psi": 219_712, "sequence_length": HF_SEQ},
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 1, "steps_profiled": 2, "deepspeed_config": ds_config(3, ga=1, **DS_AS_7B)}),
    "ds-zero3-lora-r4-past-reuse-distance": (
        lambda o: case_deepspeed(o, ds_config(3, ga=1, reuse_distance=10_000, prefetch=500, live=10_000),
                                 lora=LORA_R), {
        "scheme": f"DeepSpeed ZeRO stage 3 on LoRALinear layers (a frozen Linear beside trained "
                  f"rank-{LORA_R} adapters) at ds-zero3-past-reuse-distance-ga2's reuse distance, live "
                  "parameters and prefetch bucket, 1 micro-batch",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "lora_rank": LORA_R, "frozen": ["layers.*.base"], "psi_trained": PSI_LORA,
        "micro_batches": 1, "steps_profiled": 2,
        "deepspeed_config": ds_config(3, ga=1, reuse_distance=10_000, prefetch=500, live=10_000)}),
    "ds-zero3-gpt2-tied-past-reuse-distance": (
        lambda o: case_ds_gpt2(o, ds_config(3, ga=1, **DS_AS_7B), n_layer=3), {
        "scheme": "ds-zero3-gpt2-past-reuse-distance with the output layer's weight the token embedding's "
                  "(transformers' default tie_word_embeddings=True, as GPT-2, Llama 3.2 1B and 3B and Qwen "
                  "2.5 up to 3B have it)",
        "model": {"gpt2_config": {**HF_GPT2, "n_layer": 3}, "psi": 186_944, "sequence_length": HF_SEQ},
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 1, "steps_profiled": 2, "deepspeed_config": ds_config(3, ga=1, **DS_AS_7B)}),
    "ds-zero3-gpt2-tied-past-reuse-distance-non-reentrant-checkpoint": ds_gpt2_checkpoint_variant_case(
        "ds-zero3-gpt2-tied-past-reuse-distance (the output layer's weight the token embedding's)",
        {"n_layer": 3}, 186_944, ds_config(3, ga=1, **DS_AS_7B)),
    "ds-zero3-gpt2-lora-r4-past-reuse-distance-non-reentrant-checkpoint": ds_gpt2_checkpoint_variant_case(
        f"ds-zero3-gpt2-past-reuse-distance with peft's LoRA of rank {LORA_R} on every Conv1D "
        "(HF_LORA_TARGETS), the base model frozen", HF_GPT2_3, 219_712 + 12_288,
        ds_config(3, ga=1, **DS_AS_7B), lora=LORA_R, lora_rank=LORA_R, lora_targets=HF_LORA_TARGETS,
        frozen=["all but *.lora_A.*, *.lora_B.*"], psi_trained=12_288),
    "ds-zero3-gpt2-lora-r4-non-reentrant-checkpoint": ds_gpt2_checkpoint_variant_case(
        f"DeepSpeed ZeRO stage 3 at its default reuse distance, live parameters and prefetch bucket (the "
        f"model well within them) on transformers' GPT-2 (3 blocks, output layer untied) with peft's LoRA of "
        f"rank {LORA_R} on every Conv1D (HF_LORA_TARGETS), the base model frozen", HF_GPT2_3,
        219_712 + 12_288, ds_config(3, ga=1), lora=LORA_R, lora_rank=LORA_R, lora_targets=HF_LORA_TARGETS,
        frozen=["all but *.lora_A.*, *.lora_B.*"], psi_trained=12_288),
    "ds-zero3-gpt2-hpz2-past-reuse-distance": (
        lambda o: case_ds_gpt2(o, ds_config(3, ga=1, hpz=2, **DS_AS_7B), **HF_GPT2_3), {
        "scheme": "ds-zero3-gpt2-past-reuse-distance with ZeRO++ hpZ (zero_hpz_partition_size 2: a secondary "
                  "copy of the parameters in each group of 2 ranks, as ZeRO++ keeps one in each node)",
        "model": {"gpt2_config": {**HF_GPT2, **HF_GPT2_3}, "psi": 219_712, "sequence_length": HF_SEQ},
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4, "hpz": [[0, 1], [2, 3]]}, "micro_batches": 1, "steps_profiled": 2,
        "deepspeed_config": ds_config(3, ga=1, hpz=2, **DS_AS_7B)}),
    "ds-zero3-gpt2-hpz2-past-reuse-distance-non-reentrant-checkpoint": ds_gpt2_checkpoint_variant_case(
        "ds-zero3-gpt2-hpz2-past-reuse-distance (ZeRO++ hpZ, zero_hpz_partition_size 2)", HF_GPT2_3, 219_712,
        ds_config(3, ga=1, hpz=2, **DS_AS_7B), groups={"dp": WORLD4, "hpz": [[0, 1], [2, 3]]}),
    "ds-zero3-gpt2-tied-hpz2-past-reuse-distance-ga2": (
        lambda o: case_ds_gpt2(o, ds_config(3, ga=2, hpz=2, **DS_AS_7B), n_layer=3), {
        "scheme": "ds-zero3-gpt2-tied-past-reuse-distance with ZeRO++ hpZ (zero_hpz_partition_size 2), 2 "
                  "micro-batches",
        "model": {"gpt2_config": {**HF_GPT2, "n_layer": 3}, "psi": 186_944, "sequence_length": HF_SEQ},
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4, "hpz": [[0, 1], [2, 3]]}, "micro_batches": 2, "steps_profiled": 2,
        "deepspeed_config": ds_config(3, ga=2, hpz=2, **DS_AS_7B)}),
    "ds-zero3-hpz2-past-reuse-distance-ga2": (
        lambda o: case_deepspeed(o, ds_config(3, ga=2, hpz=2, reuse_distance=10_000, prefetch=500,
                                              live=10_000)), {
        "scheme": "ds-zero3-past-reuse-distance-ga2 with ZeRO++ hpZ (zero_hpz_partition_size 2)",
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4, "hpz": [[0, 1], [2, 3]]}, "micro_batches": 2, "steps_profiled": 2,
        "deepspeed_config": ds_config(3, ga=2, hpz=2, reuse_distance=10_000, prefetch=500, live=10_000)}),
    "ds-zero3-gpt2-past-reuse-distance-reentrant-checkpoint": ds_gpt2_checkpoint_case(True, "4"),
    "ds-zero3-gpt2-past-reuse-distance-non-reentrant-checkpoint": ds_gpt2_checkpoint_case(False, "5"),
    "hsdp-2x2-odd-widths-ga2": (
        lambda o: case_fsdp2(o, mesh_shape=(2, 2), mesh_names=("replicate", "shard"), k=2, sync_every=True,
                             steps=2, layers=ODD_LAYERS), {
            "scheme": "HSDP (FSDP2 on replicate 2 x shard 2) on layers of widths 191 and 150, 2 "
                      "micro-batches each reducing its gradients: the first dimension of 191 padded to 192 "
                      "on 2 shard ranks",
            "layers": ODD_LAYERS, "param_dtype": "float32", "reduce_dtype": "float32",
            "groups": fsdp_groups((2, 2)), "micro_batches": 2, "grad_sync": "every micro-batch",
            "steps_profiled": 2}),
    "fsdp2-frozen-layers-0-2": (lambda o: case_fsdp2(o, frozen=FROZEN), {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True, layers.0 and layers.2 "
                  "frozen (requires_grad False: a frozen backbone's or LoRA's base weights), layers.1 "
                  "trained",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "frozen": ["layers.0", "layers.2"], "psi_trained": PSI_TRAINED,
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp1-shard-grad-op-frozen-layers-0-2": (lambda o: case_fsdp1(o, "SHARD_GRAD_OP", frozen=FROZEN), {
        "scheme": "FSDP1 SHARD_GRAD_OP, one unit per Linear + root, use_orig_params=True, layers.0 and "
                  "layers.2 frozen (requires_grad False), layers.1 trained",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "frozen": ["layers.0", "layers.2"], "psi_trained": PSI_TRAINED,
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp2-lora-r4": (lambda o: case_fsdp2(o, lora=LORA_R), {
        "scheme": f"FSDP2 fully_shard per LoRALinear (a frozen Linear beside trained rank-{LORA_R} adapters "
                  "lora_A, lora_B: one unit holds both) + root, reshard_after_forward=True",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "lora_rank": LORA_R, "frozen": ["layers.*.base"], "psi_trained": PSI_LORA,
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp2-lora-r4-root-holds-last": (
        lambda o: case_fsdp2(o, lora=LORA_R, lora_on=(0, 1), units=2, reshard=None, k=2, sync_every=False), {
        "scheme": f"FSDP2, LoRA of rank {LORA_R} on layers.0 and layers.1 (each a LoRALinear unit of its "
                  "own, reshard_after_forward at its default), layers.2 frozen whole and held by the root "
                  "module (as torchtune's and torchtitan's roots hold the embeddings and the output layer); "
                  "2 micro-batches, gradients reduced in the last alone",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "lora_rank": LORA_R, "frozen": ["layers.0.base", "layers.1.base", "layers.2"],
        "psi_trained": PSI_LORA - LORA_R * sum(LAYERS[2]),
        "micro_batches": 2,
        "grad_sync": "last micro-batch only (set_requires_gradient_sync(False) on the first)",
        "steps_profiled": 3}),
    "ds-zero3-lora-r4-ga4": (lambda o: case_deepspeed(o, ds_config(3), lora=LORA_R), {
        "scheme": "DeepSpeed ZeRO stage 3 on the LoRALinear model (frozen Linears beside trained "
                  f"rank-{LORA_R} adapters), the optimizer over the trained parameters",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "lora_rank": LORA_R, "frozen": ["layers.*.base"], "psi_trained": PSI_LORA,
        "micro_batches": DS_GA, "steps_profiled": 2, "deepspeed_config": ds_config(3)}),
    "fsdp1-full-shard": (case_fsdp1, {
        "scheme": "FSDP1 (FullyShardedDataParallel) FULL_SHARD, one unit per Linear (ModuleWrapPolicy) "
                  "+ root",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp1-full-shard-3-ranks": (lambda o: case_fsdp1(o, steps=2), {
        "scheme": "FSDP1 FULL_SHARD on 3 ranks, one unit per Linear + root: layers.1's flat parameter "
                  "(30,880 elements) padded to 30,882, a multiple of 3", "world_size": 3,
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"shard": [[0, 1, 2]]},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 2}),
    "fsdp1-mixed-bf16-fp32": (lambda o: case_fsdp1(o, mixed=True), {
        "scheme": "FSDP1 FULL_SHARD, one unit per Linear + root, MixedPrecision(param_dtype=bfloat16, "
                  "reduce_dtype=float32)",
        "param_dtype": "bfloat16", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp1-hybrid-2x2": (lambda o: case_fsdp1(o, "HYBRID_SHARD"), {
        "scheme": "FSDP1 HYBRID_SHARD, one unit per Linear + root, process_group=(shard group of 2, "
                  "replicate group of 2)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((2, 2)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 3}),
    "fsdp1-ga4-no-sync": (lambda o: case_fsdp1(o, k=4, no_sync=True, steps=2), {
        "scheme": "FSDP1 FULL_SHARD, one unit per Linear + root",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 4, "steps_profiled": 2,
        "grad_sync": "last micro-batch only (no_sync() on the first 3)"}),
    "fsdp1-reentrant-checkpoint": (lambda o: case_fsdp1(o, checkpointed=(1,), steps=2), {
        "scheme": "FSDP1 FULL_SHARD, one unit per Linear + root, layers.1 under "
                  "torch.utils.checkpoint.checkpoint(use_reentrant=True) (checkpoint(FSDP(layer)))",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 2,
        "checkpointed": ["layers.1"]}),
    "fsdp1-gpt2-reentrant-checkpoint": (case_fsdp1_gpt2_checkpoint, {
        "scheme": "FSDP1 FULL_SHARD on Hugging Face's GPT-2, one unit per GPT2Block + root, "
                  "gradient_checkpointing_enable(use_reentrant=True)",
        "model": {"transformers": "GPT2LMHeadModel", "config": {**HF_GPT2, "n_layer": 2}, "psi": 136_960,
                  "sequence_length": HF_SEQ}, "optimizer": "AdamW",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 2,
        "checkpointed": ["transformer.h.0", "transformer.h.1"]}),
    "fsdp1-shard-grad-op-eval-every-2": (
        lambda o: case_fsdp1(o, "SHARD_GRAD_OP", steps=4, evaluate_every=2), {
        "scheme": "FSDP1 SHARD_GRAD_OP, one unit per Linear + root; after every 2nd optimizer step "
                  "(0, 2, 4), inside its ProfilerStep, an evaluation of 2 batches (a 16-element loss "
                  "all-reduce each)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 1, "steps_profiled": 4, "grad_sync": "every micro-batch"}),
    "fsdp1-shard-grad-op-ga4-no-sync": (
        lambda o: case_fsdp1(o, "SHARD_GRAD_OP", k=4, no_sync=True, steps=2), {
        "scheme": "FSDP1 SHARD_GRAD_OP, one unit per Linear + root",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
        "micro_batches": 4, "steps_profiled": 2,
        "grad_sync": "last micro-batch only (no_sync() on the first 3)"}),
    "fsdp1-hybrid-zero2-2x2-ga4-no-sync": (
        lambda o: case_fsdp1(o, "_HYBRID_SHARD_ZERO2", k=4, no_sync=True, steps=2), {
        "scheme": "FSDP1 _HYBRID_SHARD_ZERO2 (SHARD_GRAD_OP inside the shard group), one unit per Linear + "
                  "root, process_group=(shard group of 2, replicate group of 2)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((2, 2)),
        "micro_batches": 4, "steps_profiled": 2,
        "grad_sync": "last micro-batch only (no_sync() on the first 3)"}),
    "fsdp2-reshard-to-2": (lambda o: case_fsdp2(o, reshard=2, steps=2), {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=2 (after forward, parameters "
                  "resharded over groups of 2: the backward gathers on them)",
        "param_dtype": "float32", "reduce_dtype": "float32",
        # fully_shard makes the post-forward mesh's two dimensions: groups of 2 to reshard over, and across
        # them (no call runs on the second)
        "groups": {**fsdp_groups((4,)), "post_forward_shard": [[0, 1], [2, 3]],
                   "post_forward_replicate": [[0, 2], [1, 3]]},
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 2}),
    "ddp-ga4-sync-every": (lambda o: case_ddp(o, k=4, no_sync=False, steps=2), {
        "scheme": "DDP", "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 4, "grad_sync": "every micro-batch", "steps_profiled": 2}),
    "ddp-ga4-no-sync-reentrant-checkpoint": (
        lambda o: case_ddp(o, k=4, no_sync=True, steps=2, checkpointed=(1,)), {
            "scheme": "DDP", "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
            "micro_batches": 4, "steps_profiled": 2,
            "grad_sync": "last micro-batch only (no_sync() on the first 3)",
            "activation_checkpointing":
                "layers.1 under torch.utils.checkpoint.checkpoint(use_reentrant=True)"}),
    "ddp-ga4-sync-every-step-per-micro-batch": (lambda o: case_ddp_step_per_micro_batch(o, no_sync=False), {
        "scheme": "DDP, 4 micro-batches each all-reducing its gradients, prof.step() every micro-batch",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 4, "grad_sync": "every micro-batch",
        "warmup": 4, "steps_profiled": 12, "profiler_step_per": "micro-batch"}),
    "ds-zero1-ga4-without-profiler-steps": (
        lambda o: case_deepspeed(o, ds_config(1), steps=3, without_steps=True), {
            "scheme": "DeepSpeed ZeRO stage 1, profiled without a schedule or prof.step()",
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
            "micro_batches": DS_GA, "steps_profiled": 3, "profiler_step_per": "none (no ProfilerStep)",
            "schedule": "none: torch.profiler.profile around 3 optimizer steps, after 1 unprofiled"}),
    "fsdp2-ga4-sync-every-without-profiler-steps": (
        lambda o: case_fsdp2(o, k=4, sync_every=True, steps=3, without_steps=True), {
            "scheme": ("FSDP2, 4 micro-batches each reduce-scattering, profiled without a schedule or "
                       "prof.step()"),
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": fsdp_groups((4,)),
            "micro_batches": 4, "steps_profiled": 3, "profiler_step_per": "none (no ProfilerStep)",
            "schedule": "none: torch.profiler.profile around 3 optimizer steps, after 1 unprofiled"}),
    "ddp-eval-own-steps": (case_ddp_eval_own_steps, {
        "scheme": "DDP, each training step and each evaluation batch its own ProfilerStep: 2 of each in turn",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 1, "steps_profiled": 8, "training_steps_profiled": 4,
        "evaluation": "forward under torch.no_grad(), loss and metric all-reduced",
        "evaluation_steps": [3, 4, 7, 8],
        "profiler_step_per": "training step or evaluation batch"}),
    "ddp-ga4-no-sync": (lambda o: case_ddp(o, k=4, no_sync=True, steps=2), {
        "scheme": "DDP", "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
        "micro_batches": 4, "steps_profiled": 2,
        "grad_sync": "last micro-batch only (no_sync() on the first 3)"}),
    "ddp-compiled-ga4-no-sync": (lambda o: case_ddp(o, k=4, no_sync=True, steps=2, warmup=2, compiled=True), {
        "scheme": "DDP under torch.compile", "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4}, "micro_batches": 4, "steps_profiled": 2, "warmup": 2,
        "grad_sync": "last micro-batch only (no_sync() on the first 3)"}),
    "lightning-ddp-ga4": (case_lightning, {
        "scheme": "Lightning Trainer, DDP, accumulate_grad_batches=4, Lightning's PyTorchProfiler",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4}, "micro_batches": 4,
        "grad_sync": "last micro-batch only (Lightning's no_sync() on the first 3)",
        "schedule": {"wait": 0, "warmup": 1, "active": 8}, "steps_profiled": 8,
        "profiler_step_per": "micro-batch"}),
    "lightning-ddp-ga4-sync-dist": (lambda o: case_lightning(o, sync_dist=True), {
        "scheme": "Lightning Trainer, DDP, accumulate_grad_batches=4, the loss logged with sync_dist=True, "
                  "Lightning's PyTorchProfiler",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4}, "micro_batches": 4,
        "grad_sync": "last micro-batch only (Lightning's no_sync() on the first 3)",
        "schedule": {"wait": 0, "warmup": 1, "active": 8}, "steps_profiled": 8,
        "profiler_step_per": "micro-batch"}),
    "ds-autotp2-zero1-ga2": (lambda o: case_deepspeed_autotp(o, autotp_config(1)), {
        "scheme": "DeepSpeed AutoTP training (tensor parallelism 2 of a one-layer Llama) beside ZeRO stage 1 "
                  "on the data-parallel groups of 2",
        "model": {"transformers": "LlamaForCausalLM", "config": AUTOTP_LLAMA},
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"tp": [[0, 1], [2, 3]], "dp": [[0, 2], [1, 3]]}, "micro_batches": 2, "steps_profiled": 2,
        "deepspeed_config": autotp_config(1)}),
    "ds-ulysses2-zero2": (lambda o: case_deepspeed_ulysses(o, ulysses_config(2)), {
        "scheme": "DeepSpeed Ulysses sequence parallelism 2 (Arctic Long Sequence Training, "
                  "UlyssesSPAttentionHF over sdpa) of a one-layer Llama beside ZeRO stage 2 over all 4 ranks",
        "model": {"transformers": "LlamaForCausalLM", "config": AUTOTP_LLAMA},
        "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"sp": [[0, 1], [2, 3]], "dp": WORLD4}, "micro_batches": 1, "steps_profiled": 2,
        "deepspeed_config": ulysses_config(2)}),
    "hf-trainer-ddp": (lambda o: case_hf_trainer(o, steps=3), {
        "scheme": "Hugging Face Trainer, DDP (its default on several ranks)", "param_dtype": "float32",
        "reduce_dtype": "float32", "groups": {"dp": WORLD4}, "micro_batches": 1,
        "grad_sync": "every micro-batch", "steps_profiled": 3,
        "profiler_step_per": "optimizer step (TrainerCallback.on_step_end)", "optimizer": HF_OPTIMIZER}),
    "hf-trainer-ddp-ga4": (lambda o: case_hf_trainer(o, ga=4), {
        "scheme": "Hugging Face Trainer, DDP, gradient_accumulation_steps=4", "param_dtype": "float32",
        "reduce_dtype": "float32", "groups": {"dp": WORLD4}, "micro_batches": 4, "steps_profiled": 2,
        "grad_sync": "last micro-batch only (Accelerate's no_sync() on the first 3)",
        "profiler_step_per": "optimizer step (TrainerCallback.on_step_end)", "optimizer": HF_OPTIMIZER}),
    "hf-trainer-gpt2-ddp-ga2-log-every-2": (
        lambda o: case_hf_trainer(o, ga=2, steps=4, gpt2=True, logging_steps=2), {
            "scheme": "Hugging Face Trainer, DDP, a GPT-2 of one layer (GPT2LMHeadModel from its config), "
                      "gradient_accumulation_steps=2, logging_steps=2",
            "model": {"gpt2_config": HF_GPT2, "psi": 86_976, "sequence_length": HF_SEQ},
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
            "micro_batches": 2, "grad_sync": "last micro-batch only (Accelerate's no_sync() on the first)",
            "steps_profiled": 4, "profiler_step_per": "optimizer step (TrainerCallback.on_step_end)",
            "optimizer": HF_OPTIMIZER}),
    "hf-trainer-gpt2-ds-zero3-ga2-eval-every-2": (
        lambda o: case_hf_trainer(o, ga=2, steps=4, gpt2=True, logging_steps=2, eval_steps=2,
                                  deepspeed_config=HF_DS_ZERO3_AUTO), {
            "scheme": "Hugging Face Trainer, DeepSpeed ZeRO stage 3 (persistence, prefetch and buckets "
                      "'auto'), the GPT-2 of hf-trainer-gpt2-ddp-ga2-log-every-2, "
                      "gradient_accumulation_steps=2, logging_steps=2, an evaluation of 64 sequences every 2 "
                      "steps (eval_strategy='steps')",
            "model": {"gpt2_config": HF_GPT2, "psi": 86_976, "sequence_length": HF_SEQ},
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": WORLD4},
            "micro_batches": 2, "steps_profiled": 4, "deepspeed_config": HF_DS_ZERO3_AUTO,
            "evaluation": "every 2nd step, after its on_step_end: in the next ProfilerStep",
            # 64 sequences over 4 ranks, 8 a batch: 2 forward passes a rank, each with its loss
            "evaluation_loss_calls": 2,
            "profiler_step_per": "optimizer step (TrainerCallback.on_step_end)", "optimizer": HF_OPTIMIZER}),
    "hf-trainer-ds-zero2-ga4": (lambda o: case_hf_trainer(o, ga=4, deepspeed_config=HF_DS_ZERO2), {
        "scheme": "Hugging Face Trainer, DeepSpeed ZeRO stage 2 (its defaults but the stage), "
                  "gradient_accumulation_steps=4", "param_dtype": "float32", "reduce_dtype": "float32",
        "groups": {"dp": WORLD4}, "micro_batches": 4, "steps_profiled": 2,
        "deepspeed_config": HF_DS_ZERO2,
        "profiler_step_per": "optimizer step (TrainerCallback.on_step_end)", "optimizer": HF_OPTIMIZER}),
}
WORLD = 4  # every case runs on 4 ranks but those whose facts say "world_size"


def describe(case):
    """What ran, as written to OUTDIR/run.json."""
    _, facts = CASES[case]
    layers = facts.get("layers", LAYERS)
    out = {"case": case, "world_size": facts.get("world_size", WORLD), "backend": "gloo (CPU)",
           "torch": torch.__version__,
           "python": sys.version.split()[0],
           "model": {"layers": [f"Linear({i}, {o})" for i, o in layers], "activation": "ReLU",
                     "psi": sum(i * o + o for i, o in layers),
                     "psi_per_layer": [i * o + o for i, o in layers]},
           "micro_batch_size": MICRO_BATCH, "optimizer": "Adam",
           "profiler": {"activities": "CPU", "record_shapes": facts.get("record_shapes", True),
                        "schedule": facts.get("schedule", {"wait": 0, "warmup": facts.get("warmup", 1),
                                                           "active": facts["steps_profiled"]}),
                        "one ProfilerStep per": facts.get("profiler_step_per", "optimizer step")}}
    if case.startswith("ds-") or "deepspeed_config" in facts:
        import deepspeed

        out["deepspeed"] = deepspeed.__version__
    if case.startswith("lightning-"):
        import lightning

        out["lightning"] = lightning.__version__
    if case.startswith("hf-"):
        import accelerate
        import transformers

        out["transformers"], out["accelerate"] = transformers.__version__, accelerate.__version__
    if "transformers" in facts.get("model", {}) or "gpt2_config" in facts.get("model", {}):
        import transformers

        out["transformers"] = transformers.__version__
    if "lora_targets" in facts:
        import peft

        out["peft"] = peft.__version__
    profiler_keys = ("warmup", "schedule", "record_shapes")  # in out["profiler"]
    out.update({key: v for key, v in facts.items() if key != "layers" and key not in profiler_keys})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", nargs="?", choices=sorted(CASES))
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--list", action="store_true", help="print the cases")
    ap.add_argument("--describe", action="store_true", help="print CASE's run.json and exit")
    args = ap.parse_args()
    if args.describe and args.case:
        print(json.dumps(describe(args.case), indent=1))
        return
    if args.list or not args.case:
        for name, (_, facts) in CASES.items():
            print(f"{name}\t{facts['scheme']}")
        return
    fn, facts = CASES[args.case]
    if args.case.startswith("ds-"):
        import deepspeed

        deepspeed.init_distributed(dist_backend="gloo")
    else:
        dist.init_process_group("gloo")
    world = facts.get("world_size", WORLD)
    if dist.get_world_size() != world:
        sys.exit(f"{args.case} runs on {world} ranks, not {dist.get_world_size()}")
    os.makedirs(args.outdir, exist_ok=True)
    if dist.get_rank() == 0:
        with open(os.path.join(args.outdir, "run.json"), "w") as f:
            json.dump(describe(args.case), f, indent=1)
            f.write("\n")
    fn(args.outdir)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
