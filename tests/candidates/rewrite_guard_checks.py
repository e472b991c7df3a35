"""Cheat: reduces in place into its input and returns a view of it, and rewrites the code of the harness's
input fingerprint and output check in place (`__code__`), so every reference the Guard bound before the
import runs the new code and no watched name changes. Before the scorer judged mutation and aliasing itself
it was scored with no finding. Must be "integrity": the scorer fingerprints the inputs the rank held after
the call, and looks for outputs sharing an input's memory, in its own process."""
import torch.distributed as dist

import hwbackend.guard


def _same(tensors):
    return "unchanged"


def _fine(outputs, inputs, tensors_only=True):
    return []


hwbackend.guard.fingerprint.__code__ = _same.__code__
hwbackend.guard.output_problems.__code__ = _fine.__code__


def solution(x):
    dist.all_reduce(x)
    return x[:]
