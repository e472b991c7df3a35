# pkb-corpus
# family: C2
# title: 2-D DeviceMesh (dp, tp): every tp shard reduces over the tp dimension by name
# patterns: device_mesh, all_reduce
# world_sizes: 4, 8
# expect: ok
# twin: C2_devicemesh_wrong_dim_bug.py
# source: https://docs.pytorch.org/docs/stable/distributed.html#torch.distributed.device_mesh.DeviceMesh
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    mesh = init_device_mesh("cuda", (world // 2, 2), mesh_dim_names=("dp", "tp"))
    tp_rank = mesh.get_local_rank("tp")
    partial = torch.full((256,), float(rank), device="cuda")  # row-parallel matmul partial sum
    bias = torch.zeros(256, device="cuda")
    if tp_rank == 1:
        partial += bias  # the last tp shard also owns the bias
        dist.all_reduce(partial, group=mesh.get_group("tp"))  # FIX: the tp dimension, by name
    else:
        dist.all_reduce(partial, group=mesh.get_group("tp"))

    first = rank - tp_rank  # my tp group is {first, first + 1}
    assert torch.equal(partial, torch.full((256,), float(2 * first + 1), device="cuda"))
    print(f"rank {rank}: out[0] = {partial[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
