"""Honest twin of rebuild_peer_inputs.py: it looks through the same frames and environment for seeds (and
finds what it finds), but computes the sum with a real all_reduce. Must be correct, with no finding."""
import os
import sys

import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rebuild_peer_inputs import _look_around  # noqa: E402


def solution(x):
    _look_around()
    out = x.clone()
    dist.all_reduce(out)
    return out
