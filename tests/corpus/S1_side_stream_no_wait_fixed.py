# pkb-corpus
# family: S1
# title: all_reduce on a side stream that first waits for the default stream
# patterns: all_reduce, cuda_stream
# world_sizes: 2, 4
# expect: ok
# twin: S1_side_stream_no_wait_bug.py
# source: NVIDIA/Megatron-LM#3670
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    grad = torch.empty(1024, device="cuda")
    grad.copy_(torch.arange(1024, dtype=torch.float32, device="cuda") * (rank + 1))  # default stream

    comm_stream = torch.cuda.Stream()
    comm_stream.wait_stream(torch.cuda.current_stream())  # FIX: order the copy before the all_reduce
    with torch.cuda.stream(comm_stream):
        dist.all_reduce(grad)
    torch.cuda.current_stream().wait_stream(comm_stream)

    expected = torch.arange(1024, dtype=torch.float32, device="cuda") * (world * (world + 1) // 2)
    assert torch.equal(grad, expected)
    print(f"rank {rank}: grad[1] = {grad[1].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
