"""How much of the machine other processes took while a run was under way: the run's watchdog does not
count it, so that --timeout means seconds of this machine as if the run had it alone.

On a machine that others load, a wall-clock limit made verdicts depend on the load: a ParallelKernelBench
reference that passed in 60 s on its own timed out at 120 s when a second batch ran beside it. The CPU
time of the cores the run's ranks run on (/proc/stat: the core they are pinned to, else the process's
affinity mask) less this process's own CPU time is what others took; spread over those cores, it is the
wall time they took from the run. An idle machine discounts nothing, so a loop that never ends is caught
after --timeout as before.
The discount is at most (MAX_STRETCH - 1) / MAX_STRETCH of the elapsed time: a run never gets more than
MAX_STRETCH times --timeout of wall time (a container whose /proc/stat shows busy host cores the process
does not get stays bounded).
"""
from __future__ import annotations

import os

MAX_STRETCH = 4.0
_BUSY = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (guest time is within user)


def _cores() -> set[int]:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def _busy_seconds(cores: set[int]) -> float | None:
    """CPU seconds the given cores have been busy since boot (None where /proc/stat cannot be read)."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    ticks = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
            fields = [int(x) for x in rest.split()]
            ticks += sum(fields[i] for i in _BUSY if i < len(fields))
    return ticks / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    """This process's CPU seconds, with its finished children's (a program's extension build, nvcc)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class OthersClock:
    """Wall seconds other processes took from this run's cores since it was made: the cores its rank threads
    are pinned to, else those the process may use (others busy on a core the ranks never run on take
    nothing from them)."""

    def __init__(self, cores: set[int] | None = None):
        self.cores = cores or _cores()
        self.busy0, self.own0 = _busy_seconds(self.cores), _own_seconds()

    def taken(self, elapsed: float) -> float:
        """The part of `elapsed` (wall seconds since this clock was made) that others took."""
        busy = _busy_seconds(self.cores)
        if busy is None or self.busy0 is None:
            return 0.0
        others = (busy - self.busy0) - (_own_seconds() - self.own0)
        return min(max(0.0, others) / len(self.cores), elapsed * (1 - 1 / MAX_STRETCH))
