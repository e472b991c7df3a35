"""Broken: rank 1's process aborts the way NCCL's watchdog ends one on an asynchronous CUDA error (the
message on stderr, then SIGABRT), before the worker can report. Must be "error" classified as a CUDA
error from the log (seen on an H200: an out-of-bounds index surfaces this way)."""
import os
import sys

import torch.distributed as dist


def solution(x):
    if dist.get_rank() == 1:
        sys.stderr.write("[rank1]: Process group watchdog thread terminated with exception: "
                         "CUDA error: device-side assert triggered\n")
        sys.stderr.flush()
        os.abort()
    return x.clone()
