"""Cheating: wraps the scorer's own timer (hwbackend's Guard.stop_timer, which no clock check watched) so
that every call reports half its time (no clock replaced: at 8c15731 it was scored with no finding).
Must be "integrity", and the wrapper is never called."""
import torch.distributed as dist

from hwbackend.guard import Guard

_stop = Guard.stop_timer


def _half(self, start):
    return _stop(self, start) / 2


Guard.stop_timer = _half


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
