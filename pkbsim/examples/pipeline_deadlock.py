"""One steady-state step of a 1F1B pipeline schedule: every stage sends its activations to the next
stage and its gradients to the previous one, then receives. Sends block until the peer receives (NCCL
does so for messages above its 4 MiB buffer), and neighbouring stages both send first: a deadlock."""
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
    for _ in range(2):  # micro-batches
        if rank < world - 1:
            dist.send(act, dst=rank + 1)  # forward activations
        if rank > 0:
            dist.send(grad, dst=rank - 1)  # backward gradients
        if rank < world - 1:
            dist.recv(grad_in, src=rank + 1)
        if rank > 0:
            dist.recv(act_in, src=rank - 1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
