"""CUDA-event timing shared by the GPU benchmark scripts (imports torch alone, so scripts that must not import
pkb on the GPU machine can use it)."""
from __future__ import annotations

import torch


def event_times_us(fn, args, repeats: int) -> list[float]:
    """Microseconds of each of `repeats` calls of fn(*args), each between two CUDA events on the current stream."""
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return times
