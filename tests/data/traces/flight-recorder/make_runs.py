"""Make the Flight Recorder dumps of the real-run cases: the cases of ``../real-runs/make_traces.py``
(the same model, data, seeds and steps), run without the profiler, each rank dumping its Flight
Recorder buffer after the last optimizer step.

    TORCH_FR_BUFFER_SIZE=2000 torchrun --nproc_per_node 4 make_runs.py CASE OUTDIR

writes ``OUTDIR/rank{r}.json``: what ``torch._C._distributed_c10d._dump_fr_trace_json()`` returns, as it
returns it, and ``OUTDIR/run.json`` (what ran: the case's description with ``"trace": "flight recorder"``
and ``optimizer_steps``, the warm-up step and the profiled ones, all recorded here). A dump holds every
collective since the process group began, in order, with no step markers.

    TORCH_FR_BUFFER_SIZE=2000 torchrun --nproc_per_node 4 make_runs.py CASE OUTDIR --pickled PDIR

also writes, from the same buffer at the same moment, ``PDIR/nccl_trace_rank_{r}``: what
``_dump_fr_trace(includeStackTraces=False)`` returns (the pickle a watchdog timeout writes to
``TORCH_FR_DUMP_TEMP_FILE`` + rank, under the name ``tools/flight_recorder`` reads, less each entry's
``frames``, the Python stack that enqueued it, which names the files of the machine that ran it), and
``PDIR/run.json``.
"""

import json
import os
import re
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "real-runs"))
import make_traces  # noqa: E402


def run_recorded(outdir, steps, train_step, warmup=1, record_shapes=True):
    """The ``warmup`` steps and ``steps`` optimizer steps, as ``make_traces.run_profiled`` runs them, then
    the dump (``record_shapes``, the profiler's option, has nothing to set here: a dump records shapes)."""
    for step in range(warmup + steps):
        train_step(step)
    dump = torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
    pickled = torch._C._distributed_c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=False,
                                                         onlyActive=False) if PICKLED else None
    with open(os.path.join(outdir, f"rank{dist.get_rank()}.json"), "wb") as f:
        f.write(dump if isinstance(dump, bytes) else dump.encode())
    if PICKLED:
        with open(os.path.join(PICKLED, f"nccl_trace_rank_{dist.get_rank()}"), "wb") as f:
            f.write(pickled)


#: Where ``--pickled`` writes the pickled dumps (None: not written).
PICKLED = None


EVAL_BATCHES = 5


def case_fsdp2_eval_checkpoint(outdir):
    """FSDP2 (``make_traces``' fsdp2 case: per Linear + root, reshard_after_forward=True), its warm-up and 2
    optimizer steps, then what a training script does after them: an evaluation of ``EVAL_BATCHES``
    batches (forward passes under ``torch.no_grad()``, each all-reducing its 16 per-sample losses) and a
    full state dict for a checkpoint (``get_model_state_dict(full_state_dict=True)``)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (make_traces.WORLD,), mesh_dim_names=("shard",))
    model = make_traces.fsdp2_model(mesh)
    opt = torch.optim.Adam(model.parameters(), lr=make_traces.LR)
    train_step = make_traces.fsdp2_loop(model, opt, 1, True)
    rank = dist.get_rank()
    for step in range(3):
        train_step(step)
    with torch.no_grad():
        for b in range(EVAL_BATCHES):
            x, y = make_traces.batch(rank, 100 + b, 0)
            losses = torch.cat([(model(x) - y).square().mean(dim=1), torch.zeros(16 - len(x))])
            dist.all_reduce(losses)
    get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    dump = torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
    with open(os.path.join(outdir, f"rank{rank}.json"), "wb") as f:
        f.write(dump if isinstance(dump, bytes) else dump.encode())


EVAL_EVERY = 2
EVAL_STEPS = 6


def case_fsdp2_eval_every(outdir):
    """FSDP2 (as ``fsdp2-eval-checkpoint``), ``EVAL_STEPS`` optimizer steps, and after every
    ``EVAL_EVERY``-th an evaluation of 2 batches (as there: forward passes under ``torch.no_grad()``, each
    all-reducing its 16 per-sample losses), as a training loop with ``eval_steps`` runs."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (make_traces.WORLD,), mesh_dim_names=("shard",))
    model = make_traces.fsdp2_model(mesh)
    opt = torch.optim.Adam(model.parameters(), lr=make_traces.LR)
    train_step = make_traces.fsdp2_loop(model, opt, 1, True)
    rank = dist.get_rank()
    for step in range(EVAL_STEPS):
        train_step(step)
        if (step + 1) % EVAL_EVERY == 0:
            with torch.no_grad():
                for b in range(2):
                    x, y = make_traces.batch(rank, 100 + b, 0)
                    losses = torch.cat([(model(x) - y).square().mean(dim=1), torch.zeros(16 - len(x))])
                    dist.all_reduce(losses)
    dump = torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
    with open(os.path.join(outdir, f"rank{rank}.json"), "wb") as f:
        f.write(dump if isinstance(dump, bytes) else dump.encode())


EXTRA = {
    "fsdp2-eval-every-2": (case_fsdp2_eval_every, {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True; after every "
                  f"{EVAL_EVERY}nd optimizer step an evaluation of 2 batches (a 16-element loss all-reduce "
                  "each)",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": make_traces.fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": EVAL_STEPS - 1}),
    "ds-zero3-ga4-one-evaluation": (
        lambda o: make_traces.case_deepspeed(o, make_traces.ds_config(3), steps=4, evaluate_every=3), {
            "scheme": "DeepSpeed ZeRO stage 3; after every 3rd optimizer step (0, 3), an evaluation of 2 "
                      "batches (a 16-element loss all-reduce each): one evaluation among the 4 steps after "
                      "the warm-up's",
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": make_traces.WORLD4},
            "micro_batches": make_traces.DS_GA, "steps_profiled": 4,
            "deepspeed_config": make_traces.ds_config(3)}),
    "ds-zero3-ga4-reuse0-eval-every-2": (
        lambda o: make_traces.case_deepspeed(o, make_traces.ds_config(3, reuse_distance=0, prefetch=0),
                                             steps=4, evaluate_every=2), {
            "scheme": "DeepSpeed ZeRO stage 3 without reuse or prefetch (stage3_max_reuse_distance and "
                      "stage3_prefetch_bucket_size 0: each layer gathered in the forward and again in the "
                      "backward); after every 2nd optimizer step (0, 2, 4), an evaluation of 2 batches (a "
                      "16-element loss all-reduce each)",
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": make_traces.WORLD4},
            "micro_batches": make_traces.DS_GA, "steps_profiled": 4,
            "deepspeed_config": make_traces.ds_config(3, reuse_distance=0, prefetch=0)}),
    "ds-zero3-ga4-small-buckets": (
        lambda o: make_traces.case_deepspeed(o, make_traces.ds_config(3, prefetch=20_000, bucket=20_000)), {
            "scheme": "DeepSpeed ZeRO stage 3 with reduce_bucket_size and stage3_prefetch_bucket_size "
                      "20,000 elements: each parameter gathered alone (the biases of 192, 160 and 96 "
                      "elements too) and its gradient reduced alone, in each of 4 micro-batches",
            "param_dtype": "float32", "reduce_dtype": "float32", "groups": {"dp": make_traces.WORLD4},
            "micro_batches": make_traces.DS_GA, "steps_profiled": 2,
            "deepspeed_config": make_traces.ds_config(3, prefetch=20_000, bucket=20_000)}),
    "fsdp2-checkpoint-once": (lambda o: make_traces.case_fsdp2_checkpoint(o, every=4, steps=6), {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True; a checkpoint "
                  "(torch.distributed.checkpoint.save of the model's state dict) after the 5th of its 7 "
                  "optimizer steps (every 4th from the warm-up's), as a run with a checkpoint interval saves",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": make_traces.fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 6}),
    "fsdp2-eval-checkpoint": (case_fsdp2_eval_checkpoint, {
        "scheme": "FSDP2 fully_shard per Linear + root, reshard_after_forward=True; after training, an "
                  f"evaluation of {EVAL_BATCHES} batches (a 16-element loss all-reduce each) and a full "
                  "state dict",
        "param_dtype": "float32", "reduce_dtype": "float32", "groups": make_traces.fsdp_groups((4,)),
        "micro_batches": 1, "grad_sync": "every micro-batch", "steps_profiled": 2}),
}


def main():
    global PICKLED
    case, outdir = sys.argv[1], sys.argv[2]
    if "--pickled" in sys.argv[3:]:
        PICKLED = sys.argv[sys.argv.index("--pickled") + 1]
        os.makedirs(PICKLED, exist_ok=True)
    make_traces.CASES.update(EXTRA)
    fn, facts = make_traces.CASES[case]
    make_traces.run_profiled = run_recorded
    if case.startswith("ds-"):
        import deepspeed

        deepspeed.init_distributed(dist_backend="gloo")
    else:
        dist.init_process_group("gloo")
    os.makedirs(outdir, exist_ok=True)
    if dist.get_rank() == 0:
        run = make_traces.describe(case)
        run.pop("profiler")
        # a dump has no ProfilerStep: an evaluation the case puts inside one falls after the step
        run["scheme"] = re.sub(r", inside its [^,]*ProfilerStep,", ",", run["scheme"])
        run.update({"trace": "flight recorder (torch._C._distributed_c10d._dump_fr_trace_json)",
                    "TORCH_FR_BUFFER_SIZE": os.environ.get("TORCH_FR_BUFFER_SIZE"),
                    "optimizer_steps": 1 + facts["steps_profiled"] if "steps_profiled" in facts else 4})
        for where, how in ((outdir, "_dump_fr_trace_json"), (PICKLED, "_dump_fr_trace, the pickle")):
            if where:
                run["trace"] = f"flight recorder (torch._C._distributed_c10d.{how})"
                with open(os.path.join(where, "run.json"), "w") as f:
                    json.dump(run, f, indent=1)
                    f.write("\n")
    fn(outdir)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
