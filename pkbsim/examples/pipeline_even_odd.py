"""The same 1F1B step with Megatron's even/odd ordering: even stages send first, odd stages receive
first, so every blocking send meets a posted receive."""
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    act = torch.randn(1024, 1024, device="cuda")  # 4 MiB of activations
    grad = torch.randn(1024, 1024, device="cuda")
    act_in, grad_in = torch.empty_like(act), torch.empty_like(grad)

    def sends():
        if rank < world - 1:
            dist.send(act, dst=rank + 1)
        if rank > 0:
            dist.send(grad, dst=rank - 1)

    def recvs():
        if rank < world - 1:
            dist.recv(grad_in, src=rank + 1)
        if rank > 0:
            dist.recv(act_in, src=rank - 1)

    for _ in range(2):  # micro-batches
        if rank % 2 == 0:
            sends()
            recvs()
        else:
            recvs()
            sends()
    if rank > 0:
        assert act_in.shape == act.shape
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
