# pkb-corpus
# family: D2
# title: Triton counter barrier reused without subtracting the count (the second barrier waits for world while the count passes 2 * world)
# patterns: triton, symm_mem.rendezvous, buffer_ptrs_dev, tl.atomic_add, volatile tl.load
# world_sizes: 2, 4, 8
# expect: protocol
# twin: dev_D2_triton_counter_barrier_reuse_fixed.py
# source: ThunderKittens barrier_all (include/ops/thread/util/sync.cuh), as ParallelKernelBench's kittens trees use it
# bug_line: 29
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

RESET = False


@triton.jit
def counter_barrier(counters, rank, WORLD: tl.constexpr, RESET: tl.constexpr):
    # arrive: add 1 to the counter word of every rank
    for peer in tl.static_range(WORLD):
        word = tl.load(counters.to(tl.pointer_type(tl.int64)) + peer).to(tl.pointer_type(tl.int32))
        tl.atomic_add(word, 1, sem="release", scope="sys")
    mine = tl.load(counters.to(tl.pointer_type(tl.int64)) + rank).to(tl.pointer_type(tl.int32))
    # wait until every rank arrived: the count is exactly WORLD (a peer's next arrival raises it again)
    while tl.load(mine, volatile=True) != WORLD:
        pass
    if RESET:
        tl.atomic_add(mine, -WORLD, sem="relaxed", scope="sys")


@triton.jit
def put_own_slot(slots, value, rank, WORLD: tl.constexpr):
    for peer in tl.static_range(WORLD):
        dst = tl.load(slots.to(tl.pointer_type(tl.int64)) + peer).to(tl.pointer_type(tl.float32))
        tl.store(dst + rank, value)


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    counter = symm_mem.empty(1, dtype=torch.int32, device="cuda").zero_()
    counters = symm_mem.rendezvous(counter, dist.group.WORLD)
    slot = symm_mem.empty(world, dtype=torch.float32, device="cuda")
    slots = symm_mem.rendezvous(slot, dist.group.WORLD)
    dist.barrier()
    sums = []
    for call in range(1, 5):  # back to back, no host synchronisation between the calls
        counter_barrier[(1,)](counters.buffer_ptrs_dev, rank, world, RESET)
        put_own_slot[(1,)](slots.buffer_ptrs_dev, float((rank + 1) * call), rank, world)
        counter_barrier[(1,)](counters.buffer_ptrs_dev, rank, world, RESET)
        sums.append(slot.sum().item())
    expect = [call * world * (world + 1) / 2 for call in range(1, 5)]
    assert sums == expect, f"rank {rank}: sums {sums}, expected {expect}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
