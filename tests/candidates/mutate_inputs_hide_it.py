"""Cheat: reduces in place into its input, and replaces the scorer's input fingerprint (in the worker and
in hwbackend.guard) so that the change would not show. At 8c15731 it was scored with no finding about its
inputs. Must be "integrity": the inputs are fingerprinted with the function the Guard bound before the
import, and the replacement is named."""
import sys

import torch.distributed as dist

import hwbackend.guard

for module in (sys.modules["__main__"], hwbackend.guard):  # the worker runs as __main__ (python -m)
    module.fingerprint = lambda tensors: "unchanged"


def solution(x):
    dist.all_reduce(x)
    return x.clone()
