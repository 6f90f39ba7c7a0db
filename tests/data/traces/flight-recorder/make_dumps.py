"""Make the PyTorch Flight Recorder JSON dumps in this directory: a real run, 4 ranks on gloo (CPU).

    TORCH_FR_BUFFER_SIZE=2000 torchrun --nproc_per_node 4 make_dumps.py OUT_DIR

Each rank trains Linear(128,192)-ReLU-Linear(192,96) (Ψ = 43,296) with DistributedDataParallel over its
data-parallel group, ranks {0, 2} and {1, 3} (as tensor parallelism of 2 on one node lays them out), with
``bucket_cap_mb=0.05`` (52,428 bytes a bucket: several all-reduces a step), SGD, 6 steps of 8 samples, then
writes ``rank{r}.json``: what ``torch._C._distributed_c10d._dump_fr_trace_json()`` returns, as it returns it
(a dump between steps, as a hook after the optimizer step takes one).
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]  # every rank creates every group
dp = groups[rank % 2]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 192), torch.nn.ReLU(), torch.nn.Linear(192, 96))
ddp = DDP(model, process_group=dp, bucket_cap_mb=0.05)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
torch.manual_seed(1 + rank)
for _ in range(6):
    loss = ddp(torch.randn(8, 128)).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
dump = torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "wb") as f:
    f.write(dump if isinstance(dump, bytes) else dump.encode())
dist.destroy_process_group()
