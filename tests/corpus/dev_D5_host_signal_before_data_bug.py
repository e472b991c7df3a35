# pkb-corpus
# family: D5
# title: symmetric-memory put that signals the peer before writing the data
# patterns: symm_mem.get_buffer, symm_mem.put_signal, symm_mem.wait_signal
# world_sizes: 2, 4
# expect: protocol
# twin: dev_D5_host_signal_before_data_fixed.py
# source: vllm-project/vllm#2760
# bug_line: 27
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    n = 256
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    right, left = (rank + 1) % world, (rank - 1) % world
    dst = hdl.get_buffer(right, (n,), torch.float32)
    # BUG: put_signal before the data write: the right neighbour may read the buffer before it is filled
    hdl.put_signal(dst_rank=right, channel=0)
    dst.copy_(torch.arange(n, dtype=torch.float32, device="cuda") + rank)
    hdl.wait_signal(src_rank=left, channel=0)
    got = buf.clone()
    hdl.barrier(channel=1)
    assert torch.equal(got.cpu(), torch.arange(n, dtype=torch.float32) + left), f"rank {rank}: stale data"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()