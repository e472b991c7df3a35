# pkb-corpus
# family: D1
# title: producer signals once per half-block on one slot, consumer waits once per block
# patterns: symm_mem.rendezvous, symm_mem.put_signal, symm_mem.wait_signal, symm_mem.barrier
# world_sizes: 2, 4
# expect: protocol
# twin: D1_double_put_signal_fixed.py
# source: microsoft/mscclpp#806
# bug_line: 37
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    n, half = 1024, 512
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    peer = rank ^ 1  # even ranks produce, odd ranks consume
    for it in range(2):
        if rank % 2 == 0:
            dst = hdl.get_buffer(peer, (n,), torch.float32)
            for c in range(2):  # push the block in two halves, one signal per half
                dst[c * half:(c + 1) * half].fill_(float(10 * it + c))
                hdl.put_signal(dst_rank=peer, channel=0)
        else:
            # BUG: one wait per block for two signals on the same slot: the consumer reads the
            # second half unsynchronised, a stale signal is left in the slot, and in the second
            # iteration the producer's last put_signal spins forever on the unconsumed slot
            hdl.wait_signal(src_rank=peer, channel=0)
            got = buf.clone()
            print(f"rank {rank}: iteration {it}: {got[0].item()} {got[-1].item()}")
        hdl.barrier(channel=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
