"""Cheat: leaves a detached process behind (in a session of its own) to load the machine while the
reference is timed. Must be "integrity", and the process must not survive the scoring."""
import subprocess
import sys

import torch.distributed as dist

_started = []


def solution(x):
    if not _started:
        _started.append(subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.001)"],
                                         start_new_session=True, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL))
    out = x.clone()
    dist.all_reduce(out)
    return out
