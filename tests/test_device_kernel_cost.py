"""Device kernels timed from what they do (pkbsim.device.kernel_report, pkbsim.timing.device_kernel): sector
traffic, polls kept out of the work, flag waits as hops, blocks against SMs, atomics, peer waits in the replay,
and the full-size scaling rule. Each test has the old behaviour as its buggy twin."""
import io
import pathlib

import pytest

from pkbsim.device.kernel_report import FlagChains, KernelWork, sector_bytes
from pkbsim.timing.device_kernel import L2_LATENCY_US, kernel_time, memory_us, sync_cost
from pkbsim.timing.host_model import host_model
from pkbsim.timing.replay import Replay
from pkbsim.timing.topology import load_topology
from pkbsim.timing.trace_scale import scale_device, scale_trace
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

ROOT = pathlib.Path(__file__).parent.parent
TOPO = load_topology("hgx-h200")
MODEL = host_model(None, TOPO)

STRIDED = """
import torch, triton, triton.language as tl

@triton.jit
def strided(src, dst, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs * STRIDE, mask=offs < n), mask=offs < n)

src, dst = torch.rand(8 * 1024, device="cuda"), torch.empty(1024, device="cuda")
strided[(4,)](src, dst, 1024, STRIDE={stride}, BLOCK=256)
"""

CHAIN = """
import torch, triton, triton.language as tl

@triton.jit
def chain(flags, N: tl.constexpr):
    me = tl.program_id(0)
    if me < N - 1:
        while tl.load(flags + me + 1, volatile=True) == 0:
            pass
    tl.store(flags + me, 1)

chain[({n},)](torch.zeros({n}, dtype=torch.int32, device="cuda"), N={n})
"""


def _device_record(tmp_path, source: str) -> dict:
    pytest.importorskip("triton")
    path = tmp_path / "prog.py"
    path.write_text(source)
    res = check_script(str(path), [], RunOptions(nproc=1, record_compute=True, output=io.StringIO()))
    recs = [r for r in res.traces[0].records if r.get("device")]
    assert recs, [f.render() for f in res.findings]
    return recs[-1]


def test_strided_reads_move_whole_sectors(tmp_path):
    """Every 8th float: each 4-byte element costs its 32-byte sector (the old count: 4 bytes each)."""
    dense = _device_record(tmp_path, STRIDED.format(stride=1))["device"]
    strided = _device_record(tmp_path, STRIDED.format(stride=8))["device"]
    assert dense["local_read"] == 1024 * 4
    assert strided["local_read"] == 1024 * 32
    assert sector_bytes([0, 4, 8, 12], 4) == 32 and sector_bytes([0, 32, 64], 4) == 96


@pytest.mark.parametrize("n", [3, 6])
def test_a_chain_of_waits_is_flag_hops_not_polled_bytes(tmp_path, n):
    """Program p waits for program p+1's flag: n - 1 hops in a row, whatever the simulator's polling; the polls
    are not traffic (before: every poll's 4 bytes were counted as bytes read)."""
    rec = _device_record(tmp_path, CHAIN.format(n=n))
    dev = rec["device"]
    assert dev["local_hops"] == n - 1
    assert rec["bytes_read"] == 0 and dev["local_read"] == 0
    t = kernel_time(TOPO, dev, MODEL, remote_hop_us=0.0)
    assert dev["ready_polls"] == 1   # each program's first read of its flag: a round trip, set or not
    assert t.bound == "flags" and t.flags_us == pytest.approx((n - 1) * sync_cost(TOPO, "flag_hop") + L2_LATENCY_US)


def test_flag_chains_barrier_is_one_hop_and_peer_writes_are_remote_waits():
    work, chains = KernelWork(), FlagChains()
    for block in range(4):                       # every block polls one flag, unset
        chains.read(work, block, 100, b"\0", set())
    chains.wrote("leader", 100, b"\1")           # one block of the launch sets it
    for block in range(4):
        chains.read(work, block, 100, b"\1", set())
    assert work.local_hops == 1 and work.remote_waits == 0
    chains.read(work, 0, 200, b"\0", {3})        # a peer's pad slot, set by rank 3 (no write of this launch)
    chains.read(work, 0, 200, b"\1", {3})
    assert work.remote_waits == 1 and work.waits_on == {3}


def test_a_small_grid_cannot_fill_hbm():
    """The same bytes through 16 blocks take far longer than through a full grid (the old roofline: equal)."""
    full = {"blocks": 65536, "threads": 128, "local_read": 256 << 20, "local_write": 256 << 20, "load_ops": 65536}
    small = dict(full, blocks=16)
    assert memory_us(TOPO, small, TOPO.gpu.hbm_GBps) > 5 * memory_us(TOPO, full, TOPO.gpu.hbm_GBps)


def test_hot_address_is_shared_only_when_several_blocks_update_it():
    work = KernelWork()
    work.atomic([8, 8], block=0)
    work.atomic([16], block=0)
    assert work.atomic_hot == 2 and not work.atomic_hot_shared     # a block's own slot
    work.atomic([16, 16], block=1)
    assert work.atomic_hot == 3 and work.atomic_hot_shared         # a counter fed by two blocks
    combined = KernelWork()
    combined.atomic([4] * 128, block=0, combined=True)             # one Triton vector atomic on one address
    assert combined.atomic_hot == 1 and combined.atomics == 128


def test_atomics_on_one_address_serialise():
    spread = {"blocks": 1024, "reductions": 1 << 20, "reduction_hot": 1}
    hot = dict(spread, reduction_hot=1 << 20)
    assert kernel_time(TOPO, hot, MODEL, 0.0).total_us > 2 * kernel_time(TOPO, spread, MODEL, 0.0).total_us


def _trace(ops0, ops1):
    return {"schema": "pkb.trace/1", "world_size": 2, "ranks": [{"rank": 0, "ops": ops0}, {"rank": 1, "ops": ops1}]}


def test_a_kernel_spinning_on_a_peer_waits_for_the_peers_launch():
    """Rank 1 computes 1 ms before its barrier kernel; rank 0's kernel spins on rank 1's flag, so it ends after
    rank 1's starts (before: rank 0's kernel ended after its own few microseconds)."""
    dev = {"blocks": 8, "threads": 128, "remote_waits": 1}
    kern = {"kind": "compute", "op": "barrier_kernel", "site": "k.py:1", "bytes_read": 0, "bytes_written": 0}
    slow = {"kind": "compute", "op": "mm", "site": "k.py:0", "flops": 2 * 700e12 * 1e-3, "dtype": "bfloat16"}
    doc = _trace([dict(kern, device=dict(dev, waits_on=[1]))], [slow, dict(kern, device=dict(dev, waits_on=[0]))])
    replay = Replay(TOPO, doc)
    replay.run()
    end = {k.rank: k.end for k in replay.kernels if k.name == "barrier_kernel"}
    assert end[0] > 1000 and end[0] == pytest.approx(end[1], rel=0.01)


def test_a_grid_stride_kernel_looping_at_screen_size_keeps_its_grid():
    """The host fixed the grid (`min(4, ...)`): full size loops longer on the same blocks. Reading the grid's
    size alone is not enough (one store per block: the grid still covers the data), nor is looping alone."""
    looping = {"blocks": 4, "threads": 256, "reads_grid_size": True, "store_ops": 16, "local_write": 16384}
    assert scale_device(looping, 16.0, 16.0)["blocks"] == 4
    assert scale_device(dict(looping, store_ops=4), 16.0, 16.0)["blocks"] == 64
    assert scale_device(dict(looping, reads_grid_size=False), 16.0, 16.0)["blocks"] == 64


def test_scaling_rule_scales_work_and_grid_not_protocol_rounds():
    dev = {"blocks": 4, "local_read": 1000, "load_ops": 10, "atomics": 8, "atomic_hot": 2, "reductions": 8,
           "reduction_hot": 8, "reduction_hot_shared": True, "local_hops": 3, "remote_waits": 2,
           "warp_instructions": 100}
    out = scale_device(dev, 16.0, 16.0)
    assert (out["blocks"], out["local_read"], out["load_ops"], out["atomics"], out["warp_instructions"]) == \
        (64, 16000, 160, 128, 1600)
    assert out["atomic_hot"] == 2      # a block's own slot: a barrier, not data
    assert out["reduction_hot"] == 128  # all 4 blocks' updates on one address: a counter, grows with data
    assert out["local_hops"] == 3 and out["remote_waits"] == 2
    assert scale_device(dev, 16.0, 1.0)["blocks"] == 4
    doc = scale_trace(_trace([{"kind": "compute", "op": "k", "bytes_read": 10, "device": dev,
                               "peer_bytes": {"read": {"1": 5}, "write": {}}}], []), 4.0)
    op = doc["ranks"][0]["ops"][0]
    assert op["bytes_read"] == 40 and op["peer_bytes"]["read"] == {"1": 20} and op["device"]["blocks"] == 16


def test_triton_candidate_is_predicted_at_full_size(tmp_path):
    """A Triton one-shot all-reduce is timed at the task's full size by the scaling rule, not at screen size."""
    pytest.importorskip("triton")
    import importlib.util
    spec = importlib.util.spec_from_file_location("triton_screen", ROOT / "benchmarks" / "triton_screen.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    from pkbsim.screen.pipeline import ScreenOptions, screen
    from tasks.registry import get
    path = tmp_path / "all_reduce__triton.py"
    path.write_text(bench.CANDIDATE)
    res = screen(get("all_reduce"), str(path), ScreenOptions(2, load_topology("hgx-h100"), seed=3))
    p = res.predicted
    assert any("scaled to full size" in n for n in p.notes), p.notes
    assert not any("at screen size" in n for n in p.notes), p.notes
    assert p.candidate_us > 100   # 256 MiB per rank moves for over 100 us (at screen size: about 10 us)


SCALAR_AND_GRID = """
import torch, triton, triton.language as tl

@triton.jit
def scaled(src, dst, scale, count, n, BLOCK: tl.constexpr, SYNC: tl.constexpr):
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):   # grid-stride
        s = tl.load(scale)                              # one word, each iteration: cached after its first
        if SYNC:
            tl.atomic_add(count, 1)                     # an atomic drops the program's cached words
        offs = start + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n) * s, mask=offs < n)

src, dst = torch.rand(4096, device="cuda"), torch.empty(4096, device="cuda")
scaled[(4,)](src, dst, torch.ones(1, device="cuda"), torch.zeros(1, device="cuda"), 4096, BLOCK=256, SYNC={sync})
"""


def test_a_repeated_broadcast_load_waits_once_and_a_grid_stride_kernel_says_so(tmp_path):
    """4 programs x 4 iterations: 16 vector loads and stores, and 16 loads of one word of which each program
    waits for its first only (counted every time as data loads, they dragged the mean load to a few bytes: a
    4-block one-shot all-reduce predicted 84 ms against 28 ms on an H200), unless an atomic came between; the
    kernel reads its grid's size. The one-word loads do not grow with the data."""
    dev = _device_record(tmp_path, SCALAR_AND_GRID.format(sync=False))["device"]
    assert (dev["load_ops"], dev["broadcast_loads"], dev["store_ops"], dev["reads_grid_size"]) == (16, 4, 16, True)
    synced = _device_record(tmp_path, SCALAR_AND_GRID.format(sync=True))["device"]
    assert (synced["load_ops"], synced["broadcast_loads"]) == (16, 16)
    assert (scale_device(dev, 64.0, 64.0)["blocks"], scale_device(dev, 64.0, 64.0)["broadcast_loads"]) == (4, 4)


ATOMIC_CHAIN = """
import torch, triton, triton.language as tl

@triton.jit
def tick(ctr, K: tl.constexpr, ATOMIC: tl.constexpr, LANES: tl.constexpr):
    me = tl.program_id(0)
    slots = ctr + me * LANES + tl.arange(0, LANES) if LANES > 1 else ctr + me
    for i in tl.static_range(K):
        if ATOMIC:
            tl.atomic_add(slots, 1)
        else:
            tl.store(slots, i + 1)

tick[({blocks},)](torch.zeros({blocks} * {lanes}, dtype=torch.int32, device="cuda"), K=3, ATOMIC={atomic},
                  LANES={lanes})
"""


def test_a_triton_program_waits_for_each_of_its_atomics(tmp_path):
    """Triton gives an atomic's old value to the program's threads behind a barrier: 3 atomics one after
    another are 3 L2 round trips on the program's chain, however many programs run them (on an H100 a Triton
    program's 64 system-scope CASes took 53.7 us, a CUDA thread's 57.5: an L2 round trip and a system fence
    each). The twins: the same program storing instead of adding atomically, and one whose atomics are
    vectors (each thread gets its own old value), wait for nothing."""
    atomic = _device_record(tmp_path, ATOMIC_CHAIN.format(blocks=4, atomic=True, lanes=1))["device"]
    plain = _device_record(tmp_path, ATOMIC_CHAIN.format(blocks=4, atomic=False, lanes=1))["device"]
    wide = _device_record(tmp_path, ATOMIC_CHAIN.format(blocks=16, atomic=True, lanes=1))["device"]
    vector = _device_record(tmp_path, ATOMIC_CHAIN.format(blocks=4, atomic=True, lanes=32))["device"]
    assert (vector["atomics"], vector["broadcast_atomics"]) == (4 * 3 * 32, 0)
    assert (atomic["atomics"], atomic["broadcast_atomics"], atomic["awaited_atomics"]) == (12, 3, 0)
    assert (wide["atomics"], wide["broadcast_atomics"]) == (48, 3)         # a chain per program, not a sum
    assert plain["broadcast_atomics"] == 0
    hbm = TOPO.gpu.hbm_GBps
    assert memory_us(TOPO, atomic, hbm) == pytest.approx(memory_us(TOPO, dict(atomic, broadcast_atomics=0), hbm)
                                                         + 3 * L2_LATENCY_US)
    assert scale_device(atomic, 64.0, 64.0)["broadcast_atomics"] == 3      # a protocol's round trips stay


def test_a_thread_waits_an_l2_round_trip_for_its_own_atomic():
    """An inline-CUDA atom whose old value the thread waits for (a CAS, an exchange, an ordered one; a relaxed
    reducible one is taken as a RED and not counted, ptx_memory._reduction): one L2 round trip on its block's
    chain each, counted per block, the longest chain."""
    from pkbsim.timing.device_kernel import L2_LATENCY_US
    work = KernelWork()
    for _ in range(3):
        work.chain_step(0, "awaited_atomics")
    work.chain_step(1, "awaited_atomics")
    work.chain_step(1, "broadcast_atomics")
    assert (work.longest_chain("awaited_atomics"), work.longest_chain("broadcast_atomics")) == (3, 1)
    dev = {"blocks": 2, "threads": 32, "awaited_atomics": 3}
    assert memory_us(TOPO, dev, TOPO.gpu.hbm_GBps) == pytest.approx(3 * L2_LATENCY_US)
    assert memory_us(TOPO, dict(dev, awaited_atomics=0), TOPO.gpu.hbm_GBps) == 0.0


def test_a_loop_over_data_that_fits_the_l2_hits_it_after_its_first_round():
    """2 blocks looping 128 times over 128 KiB: the first round of loads from HBM, the other 127 L2 hits (an
    H200 ran such a ring read in 24.5 us; 55.0 predicted with every round at HBM latency, the twin). The same
    loop over data past the L2 waits on HBM every round."""
    from pkbsim.timing.device_kernel import L2_LATENCY_US, LOAD_LATENCY_US
    hbm = TOPO.gpu.hbm_GBps
    small = {"blocks": 2, "threads": 128, "local_read": 256 * 512, "local_write": 256 * 512, "load_ops": 256}
    assert memory_us(TOPO, small, hbm) == pytest.approx(LOAD_LATENCY_US + 127 * L2_LATENCY_US + 2 * 256 * 512 / hbm / 1e3)
    per = int(TOPO.gpu.l2_MB * 1e6) // 256
    big = dict(small, local_read=256 * per, local_write=256 * per)
    assert memory_us(TOPO, big, hbm) == pytest.approx(128 * LOAD_LATENCY_US + 2 * 256 * per / hbm / 1e3)


SYNC_CHAIN = """
import torch, triton, triton.language as tl

@triton.jit
def waits(flags, K: tl.constexpr, POLL: tl.constexpr, SCOPE: tl.constexpr, WRITE: tl.constexpr):
    for i in tl.static_range(K):
        if POLL:
            while tl.load(flags + 32 * i, volatile=True) == 0:
                pass
        else:
            tl.load(flags + 32 * i)
    if WRITE:
        tl.store(flags + 32 * (K + 1), 7)
    tl.atomic_cas(flags + 32 * K, 1, 2, sem="release", scope=SCOPE)

waits[(1,)](torch.ones(32 * 6, dtype=torch.int32, device="cuda"), K=4, POLL={poll}, SCOPE="{scope}", WRITE={write})
"""


def test_a_wait_on_a_set_flag_costs_its_read_and_a_system_release_its_fence(tmp_path):
    """Four waits whose flags are already set: four round trips on the program's chain (an H100 took 12.0 us for
    64 such waits, 3.7 for 16), where the twin's plain loads of the same words wait for nothing more than their
    data; a release CAS at system scope after a store carries a system fence that waits for it (64 .sys
    release stores took as long as 64 system fences, 45.4 and 45.7 us); one with nothing written before it
    (a barrier's entry) or at GPU scope, none."""
    from pkbsim.timing.device_kernel import sync_us
    SYS_FENCE_US, GPU_FENCE_US = sync_cost(TOPO, "sys_fence"), sync_cost(TOPO, "gpu_fence")
    polled = _device_record(tmp_path, SYNC_CHAIN.format(poll=True, scope="sys", write=True))["device"]
    plain = _device_record(tmp_path, SYNC_CHAIN.format(poll=False, scope="gpu", write=True))["device"]
    entry = _device_record(tmp_path, SYNC_CHAIN.format(poll=True, scope="sys", write=False))["device"]
    assert (polled["ready_polls"], polled["sys_fences"], polled["local_read"]) == (4, 1, 0)
    assert (plain["ready_polls"], plain["sys_fences"]) == (0, 0) and plain["local_read"] > 0
    assert (entry["ready_polls"], entry["sys_fences"]) == (4, 0)
    assert sync_us(TOPO, polled, 0.0) == pytest.approx(4 * L2_LATENCY_US + SYS_FENCE_US)
    fences = {"blocks": 1, "threads": 32, "sys_fences": 2, "gpu_fences": 3}
    assert sync_us(TOPO, fences, 0.0) == pytest.approx(2 * SYS_FENCE_US + 3 * GPU_FENCE_US)
    t = kernel_time(TOPO, dict(fences, sys_fences=64, gpu_fences=0), MODEL, remote_hop_us=0.0)
    floor = MODEL["compute"]["min_kernel_us"]   # a chain is not hidden by the floor: it comes on top
    assert (t.bound, t.total_us) == ("flags", pytest.approx(floor + 64 * SYS_FENCE_US))
    assert scale_device(polled, 64.0, 64.0)["ready_polls"] == 4            # a protocol's steps do not scale


def test_a_few_warps_issue_at_their_latency_not_the_schedulers_rate():
    """cub's segmented sort on an H100 (2 blocks of 384 threads, 21972 PTX warp instructions) took 4.96 us:
    12 warps an SM cannot keep four schedulers busy, each waits on its last instruction. A full grid of the same
    instruction count issues four a clock an SM (the twin; the old rule charged both at four a clock)."""
    from pkbsim.timing.device_kernel import CLOCK_GHZ, ISSUE_PER_SM_CLOCK, WARP_ISSUE_CYCLES, issue_us
    few = {"blocks": 2, "threads": 384, "warp_instructions": 21972}
    assert issue_us(TOPO, few) == pytest.approx(21972 * WARP_ISSUE_CYCLES / (2 * 12 * CLOCK_GHZ * 1e3))
    assert issue_us(TOPO, few) > 2.5 * 21972 / (2 * ISSUE_PER_SM_CLOCK * CLOCK_GHZ * 1e3)
    full = {"blocks": 4 * TOPO.gpu.sms, "threads": 512, "warp_instructions": 21972 * 1000}
    assert issue_us(TOPO, full) == pytest.approx(21972 * 1000 / (TOPO.gpu.sms * ISSUE_PER_SM_CLOCK * CLOCK_GHZ * 1e3))
    assert issue_us(TOPO, dict(few, polled=True)) == 0.0   # a spinning kernel's count is the simulator's


def test_each_gpu_pays_its_own_measured_fences():
    """The H200 ran 64 system fences in 33.76 us and 64 GPU fences in 16.22, where the H100 took 45.7 and 22.9:
    its topology carries its own figures (`[gpu] sync_us`); a GPU without them (the H100, the constants'
    source, and unmeasured ones) takes the H100's. The twin: one figure for every GPU, 36-62% high on the
    H200's chains."""
    from pkbsim.timing.device_kernel import GPU_FENCE_US, SYS_FENCE_US, sync_us
    h100, h200 = load_topology("hgx-h100"), load_topology("hgx-h200")
    fences = {"blocks": 1, "threads": 32, "sys_fences": 64, "gpu_fences": 64}
    assert sync_us(h100, fences, 0.0) == pytest.approx(64 * (SYS_FENCE_US + GPU_FENCE_US))
    assert sync_us(h200, fences, 0.0) == pytest.approx(64 * (0.5042 + 0.2302))
    assert sync_cost(load_topology("hgx-b200"), "sys_fence") == SYS_FENCE_US
