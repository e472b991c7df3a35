# pkb-corpus
# family: C1
# title: functional collectives (all_reduce, reduce_scatter_tensor) issued in a rank-dependent order
# patterns: funcol.all_reduce, funcol.reduce_scatter_tensor
# world_sizes: 2, 4
# expect: mismatch
# twin: C1_funcol_order_fixed.py
# source: hiyouga/LlamaFactory#8261
# bug_line: 39
import os

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    # parallel attention + MLP block: both branches end in a collective over the TP group
    partial = {
        "attn": torch.full((world * 4, 8), float(rank), device="cuda"),
        "mlp": torch.full((world * 4, 8), float(2 * rank), device="cuda"),
    }
    order = ["attn", "mlp"]
    if rank == 0:
        order.reverse()  # rank 0 schedules the MLP branch first to overlap it with logging
    out = {}
    for name in order:
        # BUG: the issue order decides the matching: rank 0's reduce_scatter meets the
        # other ranks' all_reduce
        if name == "attn":
            out[name] = funcol.all_reduce(partial[name], "sum", dist.group.WORLD)
        else:
            out[name] = funcol.reduce_scatter_tensor(partial[name], "sum", 0, dist.group.WORLD)
    attn, mlp = funcol.wait_tensor(out["attn"]), funcol.wait_tensor(out["mlp"])

    print(f"rank {rank}: attn {attn[0, 0].item()} mlp {mlp[0, 0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
