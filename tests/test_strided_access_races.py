"""Strided accesses of symmetric buffers are race-checked word by word, not as their [min, max) extent: ranks
that each write their own interleaved slots or column slice of a peer's buffer write disjoint bytes (a
ParallelKernelBench all-to-all transpose was rejected as a write-write race); overlapping slots still race."""
import numpy as np
import pytest
import torch

from pkbsim.device.accesses import byte_runs
from pkbsim.device.lower_symm import _view_runs


def test_byte_runs_merge_touching_accesses_and_split_at_gaps():
    assert byte_runs(np.array([8, 0, 4, 4]), 4) == [(0, 12)]
    assert byte_runs(np.array([0, 8, 16]), 4) == [(0, 4), (8, 12), (16, 20)]


def test_a_column_slice_is_one_run_per_row():
    t = torch.zeros(3, 8)[:, 2:4]
    lo = t.storage_offset() * 4
    assert _view_runs(t, lo, lo + 4 * (1 + 2 * 8 + 1)) == [(8, 16), (40, 48), (72, 80)]
    c = torch.zeros(3, 8)[1:]
    assert _view_runs(c, 32, 96) == [(32, 96)]


HOST = """
import torch.distributed._symmetric_memory as symm_mem
rows, w = 4, 8
buf = symm_mem.empty((rows, w * world), dtype=torch.float32, device="cuda")
hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
hdl.barrier(channel=0)
for peer in range(world):
    dst = hdl.get_buffer(peer, (rows, w * world), torch.float32)
    dst[:, COL * w:(COL + 1) * w].copy_(torch.full((rows, w), float(rank), device="cuda"))
hdl.barrier(channel=0)
"""


def test_host_copies_into_each_ranks_own_column_slice_do_not_race(run_program):
    res = run_program(HOST.replace("COL", "rank"))
    assert res.verdict == "ok", res.output


def test_host_copies_into_the_same_column_slice_race(run_program):
    res = run_program(HOST.replace("COL", "0"))
    assert any(f.kind == "race" and "write-write" in f.message for f in res.findings), res.output


TRITON = """
import triton
import triton.language as tl
import torch.distributed._symmetric_memory as symm_mem

@triton.jit
def interleave(bufs, rank, N: tl.constexpr, WORLD: tl.constexpr):
    i = tl.arange(0, N)
    for peer in tl.static_range(WORLD):
        dst = tl.load(bufs.to(tl.pointer_type(tl.int64)) + peer).to(tl.pointer_type(tl.float32))
        tl.store(dst + i * WORLD + SLOT, (i * 0 + rank).to(tl.float32))

n = 16
buf = symm_mem.empty(n * world, dtype=torch.float32, device="cuda")
hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
hdl.barrier(channel=0)
interleave[(1,)](hdl.buffer_ptrs_dev, rank, n, world)
hdl.barrier(channel=0)
"""


def test_triton_stores_to_each_ranks_own_interleaved_slots_do_not_race(run_program):
    pytest.importorskip("triton")
    res = run_program(TRITON.replace("SLOT", "rank"))
    assert res.verdict == "ok", res.output


def test_triton_stores_to_the_same_interleaved_slots_race(run_program):
    pytest.importorskip("triton")
    res = run_program(TRITON.replace("SLOT", "0"))
    assert any(f.kind == "race" and "write-write" in f.message for f in res.findings), res.output
