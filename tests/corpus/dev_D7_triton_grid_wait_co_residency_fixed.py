# pkb-corpus
# family: D7
# title: Triton reduction that combines the programs' partial sums in a second launch
# patterns: triton, tl.atomic_add, tl.num_programs, all_reduce
# world_sizes: 2
# expect: ok
# twin: dev_D7_triton_grid_wait_co_residency_bug.py
# source: pytorch/pytorch#159215
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def partial_sums(x, partials, counter, total, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(partials + pid, tl.sum(tl.load(x + offs), axis=0))


@triton.jit
def finish(partials, total, BLOCK: tl.constexpr):
    tl.store(total, tl.sum(tl.load(partials + tl.arange(0, BLOCK)), axis=0))


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    block = 16
    x = torch.arange(block * block, dtype=torch.float32, device="cuda") + rank
    partials = torch.zeros(block, device="cuda")
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    total = torch.zeros(1, device="cuda")
    partial_sums[(block,)](x, partials, counter, total, block)
    finish[(1,)](partials, total, block)  # FIX: a second launch orders the programs
    dist.all_reduce(total)
    assert total.item() == float(x.sum().item() * world + block * block * sum(range(world)) - block * block * rank * world)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()