"""Cheat: the honest sleeper's work, but the worker's control channel (hwbackend.protocol.Channel.send, not
a watched name) rewrites every batch's reported times to a tenth. Must be "integrity": the reported times
disagree with the scorer's clock."""
import time

import torch.distributed as dist

from hwbackend.protocol import Channel

_send = Channel.send


def _send_less(self, **msg):
    if "seconds" in msg:
        msg["seconds"] = [s / 10 for s in msg["seconds"]]
    _send(self, **msg)


Channel.send = _send_less


def solution(x):
    time.sleep(0.05)
    out = x.clone()
    dist.all_reduce(out)
    return out
