# pkb-corpus
# family: D3
# title: signal pad zeroed after rendezvous with no barrier before the peers start signalling
# patterns: symm_mem.rendezvous, symm_mem.get_signal_pad, symm_mem.put_signal, symm_mem.wait_signal
# world_sizes: 2, 4
# expect: protocol
# twin: D3_signal_pad_reset_race_fixed.py
# source: apache/tvm#16797
# bug_line: 29
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    n = 1024
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    # BUG: a faster left neighbour may already have signalled this pad; zeroing it here
    # races with that put_signal and can wipe the signal, so the wait below never returns
    hdl.get_signal_pad(hdl.rank).zero_()
    right, left = (rank + 1) % world, (rank - 1) % world

    hdl.get_buffer(right, (n,), torch.float32).fill_(float(rank))
    hdl.put_signal(dst_rank=right, channel=0)
    hdl.wait_signal(src_rank=left, channel=0)
    got = buf.clone()
    dist.barrier()

    print(f"rank {rank}: got {got[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
