"""Make ``zero2-ga4-verbose.log``, ``zero3-ga4-one-evaluation-verbose.log``, ``zero3-ga1-verbose.log``,
``zero2-ga4-small-buckets-verbose.log``, ``zero3-ga2-past-reuse-distance-verbose.log``,
``zero2-ga4-summary-straggler.log`` and ``zero3-ga4-deepspeed0.15.4-verbose.log`` (``--stage 3`` under
DeepSpeed 0.15.4, with ``LOCAL_SIZE=4`` in the environment: its CPU accelerator's device count, which
DeepSpeed's launcher sets): DeepSpeed's comms logger over a real ZeRO-2 (ZeRO-3) run.

Usage (CPU, gloo; torch and DeepSpeed in a virtualenv of their own, not zerocalc dependencies)::

    torchrun --nproc_per_node 4 make_comms_log.py OUT.log [--debug]
    torchrun --nproc_per_node 4 make_comms_log.py OUT.log --stage 3 --steps 7 --evaluate-after 3
    torchrun --nproc_per_node 4 make_comms_log.py OUT.log --stage 3 --micro-batches 1 --steps 5
    torchrun --nproc_per_node 4 make_comms_log.py OUT.log --bucket-size 20000
    torchrun --nproc_per_node 4 make_comms_log.py OUT.log --stage 3 --micro-batches 2 \
        --reuse-distance 10000 --prefetch 500 --live 10000
    torchrun --nproc_per_node 4 make_comms_log.py OUT.log --not-verbose --summary --straggler

The model, data and optimizer are ``real-runs/make_traces.py``'s (the MLP of Ψ = 71,104, Adam), under
``ds_config(2)`` (ZeRO stage 2, 4 micro-batches an optimizer step, ``overlap_comm`` off) with
``comms_logger: {enabled, verbose, prof_all}``, for 3 optimizer steps. DeepSpeed logs each timed op on
rank 0 (``log_dist(..., [0])``) at INFO; this script sends its logger's records to OUT.log as they are
(DeepSpeed's own format), nothing else. ``--debug`` turns the logger's ``debug`` on: each line then names
the function that called the op (``| [Caller Func: allreduce_bucket]``). ``--stage S`` runs
``ds_config(S)``, ``--micro-batches K`` with K micro-batches an optimizer step (default 4), ``--steps N``
that many optimizer steps, ``--bucket-size E`` ``reduce_bucket_size`` and ``allgather_bucket_size`` of E
elements (default 5e8), ``--reuse-distance E``, ``--prefetch E`` and ``--live E`` ZeRO-3's
``stage3_max_reuse_distance``, ``stage3_prefetch_bucket_size`` and ``stage3_max_live_parameters`` (default
1e9, 5e7 and 1e9), ``--not-verbose`` leaves the logger's ``verbose`` off (DeepSpeed's default: no line per
op), ``--summary`` calls ``deepspeed.comm.log_summary()`` after the last step and appends what rank 0
prints to OUT.log (``--straggler``: ``log_summary(show_straggler=True)``, its breakdown with straggler
effect after the table), and ``--evaluate-after I`` evaluates once after
optimizer step I (0-based; ``make_traces.evaluate``: ``engine.eval()``, 2 batches of forward passes under
``torch.no_grad()``, each all-reducing its losses with ``torch.distributed``, which the comms logger does
not time).
"""

import contextlib
import io
import logging
import os
import sys

import deepspeed
import torch
import torch.distributed as dist
from deepspeed.utils import logger

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "real-runs"))
import make_traces as m  # noqa: E402

STEPS = 3


def main(out, debug=False, stage=2, steps=STEPS, evaluate_after=None, micro_batches=m.DS_GA,
         bucket=500_000_000, reuse_distance=1_000_000_000, prefetch=50_000_000, live=1_000_000_000,
         verbose=True, summary=False, straggler=False):
    deepspeed.init_distributed(dist_backend="gloo")
    cfg = m.ds_config(stage, ga=micro_batches, bucket=bucket, reuse_distance=reuse_distance,
                      prefetch=prefetch, live=live)
    cfg["comms_logger"] = {"enabled": True, "verbose": verbose, "prof_all": True, "debug": debug}
    model = m.make_model()
    opt = torch.optim.Adam(model.parameters(), lr=m.LR)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    rank = dist.get_rank()
    if rank == 0:  # DeepSpeed's own records, in its own format, from here on
        handler = logging.FileHandler(out, mode="w")
        handler.setFormatter(logger.handlers[0].formatter)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    for step in range(steps):
        for micro in range(cfg["gradient_accumulation_steps"]):
            x, y = m.batch(rank, step, micro)
            engine.backward(m.loss_fn(engine(x), y))
            engine.step()
        if step == evaluate_after:
            engine.eval()
            m.evaluate(engine)
            engine.train()
    if summary:  # log_all print()s its table on rank 0
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            deepspeed.comm.log_summary(show_straggler=straggler)
        if rank == 0:
            with open(out, "a") as f:
                f.write(printed.getvalue())
    dist.barrier()
    dist.destroy_process_group()


def _option(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


if __name__ == "__main__":
    main(sys.argv[1], debug="--debug" in sys.argv[2:], stage=_option("--stage", 2),
         steps=_option("--steps", STEPS), evaluate_after=_option("--evaluate-after", None),
         micro_batches=_option("--micro-batches", m.DS_GA), bucket=_option("--bucket-size", 500_000_000),
         reuse_distance=_option("--reuse-distance", 1_000_000_000),
         prefetch=_option("--prefetch", 50_000_000), live=_option("--live", 1_000_000_000),
         verbose="--not-verbose" not in sys.argv[2:], summary="--summary" in sys.argv[2:],
         straggler="--straggler" in sys.argv[2:])
