"""Cheat: returns at once and leaves the all_reduce to a background thread on rank 0, which runs its collective
after `solution` returned, beside the harness's own barrier. No peer issues a collective to match it, so on gloo
the ranks wait for each other for ever: "timeout". (With a thread on every rank the strays could match each
other before the harness's next barrier, when the threads run early: under load the score then ended correct.) Must be named a timeout that says, for each rank, what it was doing (the last phase it
reported), not a bare "no answer within 60 s"."""
import threading

import torch.distributed as dist


def solution(x):
    out = x.clone()
    if dist.get_rank() == 0:  # one rank's stray collective: no peer's can match it, whatever the threads' timing
        threading.Thread(target=dist.all_reduce, args=(out,), daemon=True).start()
    return out
