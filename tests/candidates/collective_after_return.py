"""Cheat: returns at once and leaves the all_reduce to a background thread, which runs its collective after
`solution` returned, beside the harness's own barrier. On gloo the ranks then wait for each other for ever:
"timeout". Must be named a timeout that says, for each rank, what it was doing (the last phase it
reported), not a bare "no answer within 60 s"."""
import threading

import torch.distributed as dist


def solution(x):
    out = x.clone()
    threading.Thread(target=dist.all_reduce, args=(out,), daemon=True).start()
    return out
