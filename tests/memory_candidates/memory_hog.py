"""Hostile: takes the machine's memory in `solution`: allocates and touches 64 MiB at a time, keeping every
block, up to 8 GiB per rank (bounded, so that a broken cap cannot take a test machine down), then waits.
Must end with the sandbox's one-line verdict naming its cap on resident memory: "error" with a
resource_limit finding in `pkb score`, a reject resource_limit in `pkb screen`. Its honest twin is
tests/candidates/reference_copy.py under the same cap."""
import time

import torch
import torch.distributed as dist

BLOCK = 64 << 20
LIMIT = 8 << 30


def solution(x):
    kept = []
    while len(kept) * BLOCK < LIMIT:
        block = torch.empty(BLOCK, dtype=torch.uint8)
        block.fill_(1)  # touched: resident, not just reserved
        kept.append(block)
    time.sleep(120)
    out = x.clone()
    dist.all_reduce(out)
    return out
