"""Two fast paths of the interpreter give what the slow ones give, step for step.

- A divergent group that runs plain instructions one after another (a branch's body while the other lanes wait at
  the join) goes on in `LaneGroup._run_straight` instead of one divergent step each: the same registers, memory,
  pcs, warp-instruction counts and yield points after every `run(budget)`, for small budgets too (the multi-rank
  scheduler interleaves ranks at those points), and the same fault with the same location.
- A load whose active lanes all read one global address reads the word once (`ops_memory._ld_uniform`) and hands
  the observer the lanes' addresses as a zero-stride vector: the same values, and the observer sees the same
  addresses, lane for lane.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pkbsim.ptx import compile_cuda, find_nvcc
from pkbsim.ptx import memory as ptx_memory
from pkbsim.ptx import ops_memory
from pkbsim.ptx.errors import MemoryFault
from pkbsim.ptx.memory import AddressSpace
from pkbsim.ptx.module import Launch
from pkbsim.ptx.scheduler import Counters
from pkbsim.ptx.simt import LaneGroup

SRC = r"""
extern "C" __global__ void diverge(const int* x, int* y, float* f, const long long* table, int n, int bad) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = x[i];
    long long t0 = table[0];                  // every lane one word: a uniform load
    int acc = (int)table[v & 3];              // a few distinct words
    for (int k = 0; k < (v & 7); k++) {       // per-lane trip counts
        if (v & 1) { acc += v * 3 + k; acc ^= k << 2; acc -= i; acc += (int)table[1]; }
        else { acc = acc * 5 + 1; }
        if (v & 16) __nanosleep(10);          // a yield inside a divergent region
    }
    if (v % 3 == 0) {
        acc += x[(i + 1) % n] + (int)t0 + (int)table[2];
        f[i] = (float)acc / 7.0f;
        if (bad && v == bad) y[1 << 28] = 1;  // a fault inside a straight divergent run
    }
    y[i] = acc;
}
"""


@pytest.fixture(scope="module")
def module():
    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    return compile_cuda(SRC, "straight.cu")


_TENSORS: dict = {}   # the same tensors (addresses) for both sides: registers hold pointers


def _group(module, seed: int, n: int, bad: int = 0):
    if (seed, n, bad) not in _TENSORS:
        rng = np.random.default_rng(seed)
        x = torch.from_numpy(rng.integers(0, 1 << 12, n, dtype=np.int32))
        if bad:
            x[n // 2] = bad
        table = torch.from_numpy(rng.integers(-1000, 1000, 4, dtype=np.int64))
        _TENSORS[seed, n, bad] = x, torch.zeros(n, dtype=torch.int32), torch.zeros(n), table
    x, y, f, table = _TENSORS[seed, n, bad]
    y.zero_()
    f.zero_()
    space = AddressSpace()
    params = module.pack_params("diverge", (x, y, f, table, n, bad), space)
    for region in module.memory.regions:
        space.add(region)
    block, grid = 64, -(-n // 64)
    launch = Launch((grid, 1, 1), (block, 1, 1), 0, space, params, Counters())
    return LaneGroup(module.kernel("diverge"), launch, [(c, 0, 0) for c in range(grid)]), (y, f)


def _trace(module, seed: int, n: int, budget: int, straight: bool, monkeypatch, bad: int = 0):
    """What the group looks like after every run(budget), until it ends (or the fault it ends with)."""
    with monkeypatch.context() as mp:
        if not straight:   # the divergent step alone: every instruction one step
            mp.setattr(LaneGroup, "_run_straight", lambda self, budget: (setattr(self, "_straight", None), budget)[1])
        g, (y, f) = _group(module, seed, n, bad)
        states = []
        for _ in range(100000):
            try:
                done = g.run(budget)
            except MemoryFault as e:
                states.append(("fault", str(e)))
                break
            regs = {k: v.copy() for k, v in g.regs.items()}
            states.append((done, g.upc, g.pc.copy(), g.launch.counters.warp_instructions, g.spun, regs))
            if done:
                break
        return states, y.clone(), f.clone()


def _same(a, b):
    assert len(a[0]) == len(b[0])
    for s, t in zip(a[0], b[0]):
        assert len(s) == len(t)
        for u, v in zip(s, t):
            if isinstance(u, dict):
                assert u.keys() == v.keys() and all(np.array_equal(u[k], v[k]) for k in u)
            elif isinstance(u, np.ndarray):
                assert np.array_equal(u, v)
            else:
                assert u == v
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])


@pytest.mark.parametrize("budget", [1, 3, 7, 16384])
@pytest.mark.parametrize("seed", range(3))
def test_straight_runs_step_as_divergent_steps(module, monkeypatch, seed, budget):
    n = 200 + 37 * seed     # a last, partly empty block
    _same(_trace(module, seed, n, budget, True, monkeypatch), _trace(module, seed, n, budget, False, monkeypatch))


@pytest.mark.parametrize("budget", [5, 16384])
def test_a_fault_in_a_straight_run_is_the_same_fault_at_the_same_place(module, monkeypatch, budget):
    bad = 3 * 5 * 7 * 9   # v % 3 == 0, odd
    fast = _trace(module, 4, 256, budget, True, monkeypatch, bad)
    slow = _trace(module, 4, 256, budget, False, monkeypatch, bad)
    assert fast[0][-1][0] == "fault" and "outside every mapped buffer" in fast[0][-1][1]
    _same(fast, slow)


def test_straight_runs_take_fewer_divergent_steps(module, monkeypatch):
    """Fails before _run_straight: every instruction of a divergent body was a divergent step of its own."""
    counted = {"steps": 0}
    step = LaneGroup._step_divergent

    def counting(self):
        counted["steps"] += 1
        return step(self)
    monkeypatch.setattr(LaneGroup, "_step_divergent", counting)
    fast = _trace(module, 1, 256, 16384, True, monkeypatch)[0][-1][3]
    fast_steps, counted["steps"] = counted["steps"], 0
    slow = _trace(module, 1, 256, 16384, False, monkeypatch)[0][-1][3]
    assert fast == slow and fast_steps < counted["steps"]


class _Recorder:
    """An observer that records what it is shown (op, addresses lane by lane, width) and performs the access."""

    def __init__(self):
        self.seen = []

    def access(self, g, op, ins, addrs, width, perform):
        a = np.asarray(addrs, dtype=np.uint64)
        self.seen.append((op, ins.loc, a.tolist(), width, a.strides[0] == 0 and a.size > 1))
        return perform()

    def fence(self, g, ins):
        pass


def test_uniform_loads_read_once_and_show_the_observer_every_lane(module, monkeypatch):
    def run(uniform: bool):
        with monkeypatch.context() as mp:
            if not uniform:
                mp.setattr(ops_memory, "_uniform", lambda a: False)
            gathered = []
            real = ptx_memory.gather
            mp.setattr(ops_memory, "gather", lambda region, off, dtype: (gathered.append(len(off)), real(region, off, dtype))[1])
            from pkbsim.ptx import access
            mp.setattr(access, "gather", lambda region, off, dtype: (gathered.append(len(off)), real(region, off, dtype))[1])
            g, (y, f) = _group(module, 5, 300)
            rec = _Recorder()
            g.launch.observer = rec
            while not g.run(16384):
                pass
            return rec.seen, y.clone(), f.clone(), g.launch.counters.warp_instructions, gathered
    fast, slow = run(True), run(False)
    assert [s[:4] for s in fast[0]] == [s[:4] for s in slow[0]]   # same accesses, same addresses lane by lane
    assert torch.equal(fast[1], slow[1]) and torch.equal(fast[2], slow[2]) and fast[3] == slow[3]
    # fails before _ld_uniform: table[0] was gathered once a lane
    assert any(s[4] for s in fast[0]) and not any(s[4] for s in slow[0])
    assert 1 in fast[4] and sum(fast[4]) < sum(slow[4])
