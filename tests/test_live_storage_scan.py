"""The scan of live tensors that inline CUDA falls back on for an address outside every mapped region
(pkbsim/cuda/memory.py). Ranks are threads of one interpreter, so the scan must never hand another thread's
half-built object a second reference: `tuple(genexpr)` resizes the tuple it builds, which CPython refuses
(SystemError) once anything else holds it. ParallelKernelBench's gemini-3-pro Triton 21 was rejected so."""
import gc
import sys
import threading
import time

import torch

from pkbsim.cuda import memory
from pkbsim.standins.device_identity import HOST, tag


def _stress(scan, scans: int = 60, budget_s: float = 8.0) -> tuple[int, int, list[str]]:
    """Scan `scans` times (at most `budget_s` seconds) while another thread builds tuples from generators,
    with thread switches as frequent as the interpreter allows. Returns (scans, builds, the builder's errors)."""
    stop = threading.Event()
    errors: list[str] = []
    builds = 0

    def build():
        nonlocal builds
        while not stop.is_set():
            try:
                tuple(x for x in range(50))
                tuple(str(i) for i in range(20))
                tuple((i, i) for i in range(30))
                builds += 1
            except SystemError as e:
                errors.append(str(e))

    keep = [torch.zeros(64) for _ in range(8)]  # tensors for the scan to find
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    builder = threading.Thread(target=build, daemon=True)
    builder.start()
    done, t0 = 0, time.monotonic()
    try:
        while done < scans and time.monotonic() - t0 < budget_s:
            scan()
            done += 1
    finally:
        stop.set()
        builder.join()
        sys.setswitchinterval(interval)
    del keep
    return done, builds, errors


def test_scanning_never_breaks_a_tuple_another_thread_is_building():
    scans, builds, errors = _stress(memory._device_storages)
    assert scans > 0 and builds > 0
    assert errors == [], f"{len(errors)} SystemErrors in {builds} builds over {scans} scans: {errors[0]}"


def test_the_scan_finds_live_device_tensors_and_not_host_or_freed_ones():
    live = torch.arange(1000, dtype=torch.float32)
    param = torch.nn.Parameter(torch.ones(77))
    view = live[10:20]                              # a view: its storage is the whole of `live`'s
    host = torch.ones(55)
    tag(host, HOST)                                 # the program put it on the host
    gone = torch.zeros(123457)
    gone_span = (gone.untyped_storage().data_ptr(), gone.untyped_storage().nbytes())
    del gone
    gc.collect()
    spans = memory._device_storages()
    assert (live.data_ptr(), live.untyped_storage().nbytes()) in spans
    assert (param.data_ptr(), param.untyped_storage().nbytes()) in spans
    assert view.untyped_storage().data_ptr() == live.data_ptr()
    assert (host.data_ptr(), host.untyped_storage().nbytes()) not in spans
    assert gone_span not in spans
    torch.empty(3, device="meta")  # no storage to report: skipped, not an error

    space = memory.RankMemory()
    assert space.live_tensor(live.data_ptr() + 4 * 999) == (live.data_ptr(), 4000)
    assert space.live_tensor(live.data_ptr() + 4000) != (live.data_ptr(), 4000)
    assert space.live_tensor(host.data_ptr()) is None


def test_the_scan_keeps_no_reference_and_restores_the_collector():
    probe = object()
    before = sys.getrefcount(probe)
    found = memory._live_tensors()
    assert all(isinstance(t, torch.Tensor) for t in found)
    assert sys.getrefcount(probe) == before      # the list of all objects is gone when the scan returns
    assert gc.isenabled()
    gc.disable()
    try:
        memory._live_tensors()
        assert not gc.isenabled()                   # left off where it was off
    finally:
        gc.enable()
