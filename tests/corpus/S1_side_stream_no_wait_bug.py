# pkb-corpus
# family: S1
# title: all_reduce on a side stream over a gradient produced on the default stream, without wait_stream
# patterns: all_reduce, cuda_stream
# world_sizes: 2, 4
# expect: protocol
# twin: S1_side_stream_no_wait_fixed.py
# source: NVIDIA/Megatron-LM#3670
# bug_line: 29
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    grad = torch.empty(1024, device="cuda")
    grad.copy_(torch.arange(1024, dtype=torch.float32, device="cuda") * (rank + 1))  # default stream

    comm_stream = torch.cuda.Stream()
    with torch.cuda.stream(comm_stream):
        # BUG: comm_stream does not wait for the default stream, so the all_reduce may read
        # grad before the copy above has run
        dist.all_reduce(grad)
    torch.cuda.current_stream().wait_stream(comm_stream)

    print(f"rank {rank}: grad[1] = {grad[1].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
