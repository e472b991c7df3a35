"""Integrity checks that run inside a rank worker, around the candidate's calls.

Everything here is captured before the candidate's module is imported, so that later monkeypatching
of module attributes cannot change what the harness calls; patching itself is detected by comparing
the attributes with the captured originals. (A candidate in the same process can still patch memory
directly; the scorer's own clock and the separate reference process are the defences that do not
depend on this module.)
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

import tasks.api as task_api
from tasks.api import aliased_outputs, flat_tensors

# (module or class, attribute) pairs a cheating candidate might replace to fake time or results
WATCHED = [
    (time, "perf_counter"), (time, "perf_counter_ns"), (time, "monotonic"), (time, "time"), (time, "sleep"),
    (torch.cuda, "synchronize"), (torch.cuda, "Event"), (torch.cuda.Event, "elapsed_time"),
    (torch.cuda.Event, "record"), (dist, "barrier"), (dist, "all_reduce"), (dist, "all_gather_into_tensor"),
    (torch, "randn"), (torch, "rand"), (torch, "randint"), (torch, "allclose"), (torch, "equal"),
    (torch.Tensor, "clone"), (torch.Tensor, "copy_"), (task_api, "compare"), (task_api.TaskContext, "randn"),
    (task_api.TaskContext, "rand"), (task_api.TaskContext, "randint"), (threading, "enumerate"), (torch, "save"),
]


class Guard:
    def __init__(self, device: torch.device, backend: str):
        self.device, self.backend = device, backend
        self.originals = [(obj, name, getattr(obj, name)) for obj, name in WATCHED]
        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        self.barrier = dist.barrier
        self.enumerate_threads = threading.enumerate
        self.list_dir = os.listdir
        self.clock = time.perf_counter
        self.sleep = time.sleep
        self.event = torch.cuda.Event if device.type == "cuda" else None
        self.save_file = torch.save  # how outputs (and a candidate's inputs after a trial) reach the scorer
        for name in GUARD_METHODS:  # bound now: a candidate that replaces the class's method later is not called
            setattr(self, name, getattr(self, name))
        self.fingerprint, self.output_problems = fingerprint, output_problems  # the same, for the module's checks
        # what this instance holds now: replacing an attribute of the instance itself is named too. (Code
        # rewritten in place, `__code__`, changes no name: the scorer judges mutation and aliasing itself.)
        self.bound = {name: self.__dict__[name] for name in (*GUARD_METHODS, "fingerprint", "output_problems",
                                                              "save_file", "clock", "barrier", "sync")}

    def start_timer(self):
        """CUDA events on GPUs (the device's own clock), the host clock on the CPU."""
        if self.event is None:
            return self.clock()
        ev = self.event(enable_timing=True)
        ev.record()
        return ev

    def stop_timer(self, start) -> float:
        if self.event is None:
            return self.clock() - start
        end = self.event(enable_timing=True)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def tampered(self) -> list[str]:
        """The watched names (WATCHED, and this class's own timing and checks) the candidate replaced."""
        names = []
        for obj, name, orig in self.originals:
            if getattr(obj, name, None) is not orig:
                owner = getattr(obj, "__name__", type(obj).__name__)
                names.append(f"{owner}.{name}")
        names += [f"the harness's Guard.{name}" for name, orig in self.bound.items() if self.__dict__.get(name) is not orig]
        return names

    def threads(self) -> tuple[set[int], set[str]]:
        """Python's live threads, and the kernel's ids of every thread of this process (Linux), which also
        shows a thread started below `threading` (`_thread.start_new_thread`, a C extension)."""
        python = {t.ident for t in self.enumerate_threads() if t.is_alive()}
        try:
            native = set(self.list_dir("/proc/self/task"))
        except OSError:
            native = set()
        return python, native

    def poison_allocator(self, nbytes: int) -> None:
        """Fill memory the allocator will hand out next with NaN, so stale reads show up as NaN."""
        if self.device.type == "cuda":
            junk = torch.empty(max(1, nbytes // 4), dtype=torch.float32, device=self.device)
            junk.fill_(float("nan"))
            del junk


def leftover_threads(guard: Guard, before: tuple[set[int], set[str]], first: bool,
                     watch_s: float = 1.0) -> list[str]:
    """Work still running after `solution` returned, from `guard.threads()` before the call and now. A new
    Python thread counts at once. A new kernel-level thread (one started below `threading`) counts where it
    then ends within `watch_s`: libraries (NCCL, the CUDA runtime, torch's pools, symmetric memory) start
    helper threads that they keep, which never end, and a joined thread may still be exiting at the first
    look; work left behind does end. Not after the first call, where the libraries start most of theirs."""
    python, native = guard.threads()
    found = len(python - before[0])
    new = set() if first else native - before[1]
    ended, deadline = set(), guard.clock() + watch_s
    if new:
        guard.sleep(0.02)
        new &= guard.threads()[1]        # still there after 20 ms: not a thread that was already exiting
    while new and guard.clock() < deadline:
        guard.sleep(0.05)
        alive = guard.threads()[1]
        ended |= new - alive
        new &= alive
    found = found or len(ended)
    return [f"{found} thread(s) still running after solution returned"] if found else []


def fingerprint(tensors) -> str:
    """A digest of the tensors' shapes, dtypes, layouts and bytes (a 0-dim tensor is flattened first: viewing it
    as bytes fails, which made ParallelKernelBench problem 23's scalar input an 'error' of every candidate on an
    H200; a sparse tensor, which has no dense bytes, by its index and value tensors: problem 62's COO input was
    an 'error' of every candidate)."""
    h = hashlib.sha1()
    for t in tensors:
        if isinstance(t, torch.Tensor):
            h.update(str((tuple(t.shape), t.dtype, t.layout)).encode())
            for part in _parts(t.detach()):
                h.update(part.contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _parts(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The dense tensors that hold a tensor's data: itself, or a sparse tensor's indices and values (as stored,
    not coalesced: the fingerprint must not change what it reads)."""
    if t.layout == torch.sparse_coo:
        return t._indices(), t._values()
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return t.crow_indices(), t.col_indices(), t.values()
    if t.layout in (torch.sparse_csc, torch.sparse_bsc):
        return t.ccol_indices(), t.row_indices(), t.values()
    return (t,)


def output_problems(outputs: tuple, inputs, tensors_only: bool = True) -> list[str]:
    """Outputs must be plain dense tensors that do not alias an input (with tensors_only=False, as
    ParallelKernelBench allows, other values may stand beside the tensors, nested in lists and dicts)."""
    problems = []
    for i, o in enumerate(outputs):
        if not isinstance(o, torch.Tensor) and tensors_only:
            problems.append(f"output {i} is {type(o).__name__}, not a tensor")
        problems += [f"output {i} is a tensor subclass ({type(t).__name__})" for t in flat_tensors(o)
                     if type(t) is not torch.Tensor]
    return problems + [f"output {i} aliases an input" for i in aliased_outputs(outputs, inputs)]


GUARD_METHODS = ("start_timer", "stop_timer", "tampered", "threads", "poison_allocator")
# a candidate that wraps the harness's own timer or checks is named
WATCHED += [(Guard, name) for name in GUARD_METHODS] + [(sys.modules[__name__], "fingerprint"),
                                                        (sys.modules[__name__], "output_problems")]
