"""A synthetic NCCL ``COLL`` debug log of a data-parallel run, in the layout of a real one.

The layout is that of the bundled Ray Train log (tests/data/traces/nccl-debug/
ddp-allreduce-128ranks-L4-ray.txt, from NVIDIA/nccl issue 1193): every line of every process in
one file, each prefixed by Ray's ``(RayTrainWorker pid=.., ip=..)`` tag, then NCCL's own
``host:pid:tid [dev] NCCL INFO AllReduce: opCount ..`` line, 8 GPUs per node. Each step is DDP's
gradient all-reduce in buckets (float32, sum, one communicator of all ranks), the processes'
lines of one bucket interleaved in a varying order, each process counting its own ``opCount``.
No ``Init COMPLETE`` lines (``NCCL_DEBUG_SUBSYS=COLL``): the log records no rank; with
``init=True`` each process first writes its ``Init COMPLETE`` line (``NCCL_DEBUG_SUBSYS=INIT,COLL``),
process ``i`` being rank ``37 i mod ranks`` (not the order of the lines).

    python benchmarks/synth_nccl_log.py OUT.txt --mb 500 [--ranks 128]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

#: Elements per DDP bucket of one step (float32: 25 MB buckets and a last, smaller one).
BUCKETS = (6553600, 6553600, 6553600, 6553600, 6553600, 7382228, 7066572, 1048576)


def _templates(ranks: int, rng: random.Random) -> tuple[list[list[tuple[str, str]]], list[str]]:
    """For each rank and bucket, the line's text before and after the opCount value; each
    process's ``Init COMPLETE`` line."""
    out, inits = [], []
    for r in range(ranks):
        node, dev = divmod(r, 8)
        host = f"r24-02-22-23-29-0066-raycluster-lv52c-worker-l4-8-n{node:04d}"
        pid, tid = 600 + 37 * r, 18000 + 101 * r
        tag = f"(RayTrainWorker pid={pid}, ip=10.72.{node}.6) "
        comm, stream = f"0x{rng.randrange(1 << 44):x}", f"0x{rng.randrange(1 << 44):x}"
        inits.append(f"{tag}{host}:{pid}:{tid} [{dev}] NCCL INFO comm {comm} rank {37 * r % ranks} "
                     f"nranks {ranks} cudaDev {dev} busId {dev + 1}000 - Init COMPLETE\n")
        row = []
        for b, count in enumerate(BUCKETS):
            buf = f"0x{0x78d056200000 + (r << 32) + (b << 26):x}"
            row.append((f"{tag}{host}:{pid}:{tid} [{dev}] NCCL INFO AllReduce: opCount ",
                        f" sendbuff {buf} recvbuff {buf} count {count} datatype 7 op 0 root 0 comm {comm}"
                        f" [nranks={ranks}] stream {stream}\n"))
        out.append(row)
    return out, inits


def build(path: str | Path, target_bytes: float, *, ranks: int = 128, seed: int = 0,
          init: bool = False) -> tuple[int, int]:
    """Write whole steps until the file reaches ``target_bytes``; returns (COLL lines, steps)."""
    rng = random.Random(seed)
    tpl, inits = _templates(ranks, rng)
    orders = []
    for _ in range(16):  # the order the processes' lines of one bucket reach the log
        order = list(range(ranks))
        rng.shuffle(order)
        orders.append(order)
    size = lines = steps = 0
    with open(path, "w", encoding="ascii", newline="\n") as fh:
        if init:
            size = fh.write("".join(inits))
        while size < target_bytes:
            parts = []
            for b in range(len(BUCKETS)):
                op = f"{steps * len(BUCKETS) + b:x}"
                order = orders[(steps * len(BUCKETS) + b) % len(orders)]
                parts.extend(f"{tpl[r][b][0]}{op}{tpl[r][b][1]}" for r in order)
            text = "".join(parts)
            fh.write(text)
            size += len(text)
            lines += len(parts)
            steps += 1
    return lines, steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=500.0, help="size to reach, MB (whole steps)")
    ap.add_argument("--ranks", type=int, default=128)
    args = ap.parse_args()
    lines, steps = build(args.out, args.mb * 1e6, ranks=args.ranks)
    print(f"{args.out}: {lines} COLL lines, {steps} steps, {args.ranks} ranks")


if __name__ == "__main__":
    main()
