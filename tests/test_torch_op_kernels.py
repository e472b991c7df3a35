"""Torch ops that CUDA runs as several kernels, or as one that passes over its input more than once
(pkbsim/timing/op_kernels.py), are timed as those kernels. The buggy twin of each case is the world as it
recorded before (one pass over the op's operands), which took grpo's `mask.sum()` at 2.0 us where an H200
measured 53.6, and a 128256-wide log_softmax at half its measured time.
"""
from __future__ import annotations

import io

import pytest
import torch

from pkbsim.timing.compute import PATH_STEP_TRIPS, REDUCE_FLOOR_EXTRA_US, kernel_us, op_us
from pkbsim.timing.replay import Replay
from pkbsim.timing.topology import load_topology
from pkbsim.timing.trace_scale import scale_trace
from pkbsim.world import ops_mode
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions
from pkbsim.timing.device_kernel import L2_LATENCY_US, LOAD_LATENCY_US
from pkbsim.timing.kernel_path import byte_span, kernel_path, overfetch, path_launch, scattered_reads, splits
from pkbsim.timing.op_kernels import Launch, _softmax_rereads, _softmax_row, launches
from pkbsim.world.trace import records_doc

TOPO = load_topology("hgx-h200")
aten = torch.ops.aten

PROGRAM = """
import torch
import torch.nn.functional as F
x = torch.randn(1024, 16384, device="cuda")
mask = x > 0
a = mask.sum()                                  # line 6: bool -> int64 copy, then the reduce
b = x.sum()                                     # line 7: one pass
c = torch.logsumexp(x, dim=-1)                  # line 8: amax, fix-up, sub, exp_, sum, log_, add_
w = torch.randn(256, 65536, device="cuda")
d = torch.log_softmax(w, dim=-1)                # line 10: 256 KiB rows, 2 an SM, 64 MiB in all: re-read from HBM
e = torch.log_softmax(x, dim=-1)                # line 11: 64 KiB rows: the SMs' 17 MB fit the L2
f = F.layer_norm(x, (16384,))                   # line 12: 64 KiB rows, 16 an SM: re-read from HBM
g = F.rms_norm(x, (16384,))                     # line 13: the same kernel
h = x.masked_fill(mask[:1], 0.0)                # line 14: clone, then fill in place (mask broadcast)
i = torch.cat([x[:, :8192], x[:, 8192:]], dim=-1)   # line 15: non-contiguous inputs: the generic kernel
j = torch.cat([x, x], dim=0)                    # line 16: contiguous inputs
k = x.to(torch.bfloat16).sum(dim=-1, dtype=torch.float32)   # line 17: bf16 -> float32 reduces in place
l = F.layer_norm(x[:, :1024].contiguous(), (1024,))         # line 18: 4 MiB of rows: re-read from the L2
m = torch.log_softmax(x[:, :4096], dim=-1)      # line 19: a strided input: copied, then the register kernel
n = torch.log_softmax(x[:, :4096].contiguous(), dim=-1)     # line 20: the register kernel reads once
"""
CHANGED = {6: 2, 7: 1, 8: 9, 10: 1, 11: 1, 12: 1, 13: 1, 14: 2, 15: 1, 17: 1, 18: 1, 19: 2}   # line -> kernels
ONE_PASS_TIME = {7, 16, 17, 20}   # lines timed as one pass (7 and 17: a reduce kernel, bandwidth-bound)


def _trace(tmp_path, monkeypatch, before: bool) -> dict:
    if before:   # the buggy twin: one pass per op, as the world recorded before
        monkeypatch.setattr(ops_mode, "launches", lambda *a: None)
        monkeypatch.setattr(ops_mode, "fused_launches", lambda *a: None)
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    res = check_script(str(path), [], RunOptions(nproc=1, record_compute=True, output=io.StringIO()))
    ops = [r for r in res.traces[0].records if r.get("kind") == "compute"]
    assert ops, [f.render() for f in res.findings]
    return records_doc(1, [ops], {})


def _by_line(doc) -> dict[int, tuple[dict, float]]:
    """line -> (the last op traced on it, its device time in the replay)."""
    replay = Replay(TOPO, doc)
    replay.run()
    times = [k.end - k.start for k in replay.kernels if k.kind == "compute"]
    return {int(op["site"].rsplit(":", 1)[1]): (op, t) for op, t in zip(doc["ranks"][0]["ops"], times)}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        fixed = _by_line(_trace(tmp_path_factory.mktemp("fixed"), mp, False))
        buggy = _by_line(_trace(tmp_path_factory.mktemp("buggy"), mp, True))
    finally:
        mp.undo()
    return fixed, buggy


def test_the_world_records_the_kernels_cuda_launches(traces):
    fixed, buggy = traces
    assert {n: len(fixed[n][0]["kernels"]) for n in CHANGED} == CHANGED
    assert all("kernels" not in fixed[n][0] for n in ONE_PASS_TIME - set(CHANGED))
    assert all("kernels" not in op for op, _ in buggy.values())
    # an op's bytes are its kernels' bytes
    for n in CHANGED:
        op = fixed[n][0]
        assert op["bytes_read"] == sum(k["read"] for k in op["kernels"])
        assert op["bytes_written"] == sum(k["written"] for k in op["kernels"])
    n = 1024 * 16384
    copy, reduce = fixed[6][0]["kernels"]
    assert copy == {"read": n, "written": 8 * n, "path": "cast", "elements": n, "steps": 4}
    assert reduce == {"read": 8 * n, "written": 8, "kernel": "reduce"}
    assert fixed[7][0]["kernels"] == [{"read": 4 * n, "written": 4, "kernel": "reduce"}]
    w = 4 * 256 * 65536
    assert fixed[10][0]["kernels"] == [{"read": w, "written": w, "reread": 2 * w, "resident": 2 * 4 * 65536,
                                        "span": w}]
    assert fixed[15][0]["kernels"][0]["path"] == "strided"
    assert fixed[19][0]["kernels"][0] == {"read": 4 * 1024 * 4096, "written": 4 * 1024 * 4096, "path": "strided",
                                          "elements": 1024 * 4096, "steps": 2}


def test_multi_pass_ops_take_longer_and_the_others_do_not(traces):
    fixed, buggy = traces
    t = {n: fixed[n][1] for n in fixed}
    b = {n: buggy[n][1] for n in buggy}
    for n in ONE_PASS_TIME:
        assert t[n] == pytest.approx(b[n], rel=1e-6)
    assert t[6] > 8 * b[6]                              # 17 bytes an element (a cast copy), not 1
    assert t[8] > 5 * t[7]                              # four reads of x and two writes, against one read
    assert t[10] == pytest.approx(2 * b[10], rel=0.02)  # 3 reads + 1 write against 1 + 1
    for n in (12, 13):
        assert t[n] == pytest.approx(1.5 * b[n], rel=0.02)
    for n in (11, 18):                                  # the rows of all SMs fit the L2: re-reads are hits
        assert t[n] == pytest.approx(b[n], rel=1e-6)
    assert t[14] > 1.5 * b[14] and t[15] > 1.3 * b[15] and t[19] > 1.5 * b[19]


def test_softmax_path_follows_torchs_dispatch():
    def x(n, dtype=torch.float32, rows=2):
        return torch.empty(rows, n, dtype=dtype, device="meta")
    def rereads(n, dtype=torch.float32, dim=-1):
        t = x(n, dtype)
        row = _softmax_row(t, dim)
        return row is not None and _softmax_rereads(row, t)
    assert not rereads(2048)                            # the warp kernel
    assert not rereads(9216)                            # registers: 9 elements a thread
    assert not rereads(12000)                           # shared memory: 48000 bytes fit
    assert rereads(12288)                               # 48 KiB: does not
    assert rereads(10001)                               # not a multiple of a 16-byte vector
    assert not rereads(24000, torch.bfloat16)
    assert rereads(24576, torch.bfloat16)
    assert rereads(128256)                              # vocab_parallel_cross_entropy's rows
    assert not rereads(128256, dim=0)                   # not the last dim: the spatial kernel
    assert _softmax_row(torch.empty(4, 128256, 1, device="meta"), 1) == 128256   # trailing size-1 dims


def test_odd_operands_are_one_kernel_or_named_rows():
    x = torch.randn(8, 64, 1024)
    out = [torch.empty(8, 64, 1024), torch.empty(8, 1, 1), torch.empty(8, 1, 1)]
    ln = launches(aten.native_layer_norm.default, (x, [64, 1024], None, None, 1e-5), out, (1, 1))
    assert ln[0].resident == 16 * 64 * 1024 * 4                       # a row is all the normalized dims
    nested = torch.nested.nested_tensor([torch.randn(2, 5), torch.randn(3, 5)])
    assert launches(aten._softmax.default, (nested, -1, False), [nested], (1, 1)) is None
    sparse = torch.eye(4).to_sparse()
    assert launches(aten.sum.default, (sparse,), [torch.empty(())], (1, 1)) is None
    assert launches(aten.logsumexp.default, (torch.empty(0, 4), [1]), [torch.empty(0)], (0, 0)) is None


def test_each_kernel_pays_the_floor_and_scaling_keeps_the_kernels():
    model = Replay(TOPO, records_doc(1, [[]], {})).model
    floor = model["compute"]["min_kernel_us"]
    tiny = {"flops": 0, "bytes_read": 9 * 8, "bytes_written": 9 * 8, "kernels": [{"read": 8, "written": 8}] * 9}
    assert op_us(TOPO, tiny, "fp32", model) == pytest.approx(9 * floor)
    assert op_us(TOPO, {k: v for k, v in tiny.items() if k != "kernels"}, "fp32", model) == pytest.approx(floor)
    doc = records_doc(1, [[dict(tiny, kind="compute")]], {})
    scaled = scale_trace(doc, 4.0)["ranks"][0]["ops"][0]
    assert scaled["kernels"] == [{"read": 32, "written": 32}] * 9 and scaled["bytes_read"] == 4 * 72
    # a slow-path kernel's elements grow with its bytes: at full size it is timed by four times as many
    slow = {"flops": 0, "bytes_read": 8, "bytes_written": 8, "path": "strided", "elements": 1 << 20,
            "kernels": [{"read": 8, "written": 8, "path": "strided", "elements": 1 << 20}]}
    grown = scale_trace(records_doc(1, [[dict(slow, kind="compute")]], {}), 4.0)["ranks"][0]["ops"][0]
    assert grown["elements"] == grown["kernels"][0]["elements"] == 4 << 20
    assert op_us(TOPO, grown, "fp32", model) == pytest.approx(4 * op_us(TOPO, slow, "fp32", model))


def test_a_reread_costs_hbm_only_past_the_l2():
    model = Replay(TOPO, records_doc(1, [[]], {})).model
    gib = 1 << 30
    one = {"flops": 0, "bytes_read": gib, "bytes_written": gib}
    def op(resident, span):
        return dict(one, kernels=[{"read": gib, "written": gib, "reread": 2 * gib, "resident": resident,
                                   "span": span}])
    base = op_us(TOPO, one, "fp32", model)
    assert TOPO.gpu.sms * 100_000 < TOPO.gpu.l2_MB * 1e6 < TOPO.gpu.sms * 1_000_000
    assert op_us(TOPO, op(100_000, gib), "fp32", model) == pytest.approx(base)          # the SMs' rows fit
    assert op_us(TOPO, op(1_000_000, gib), "fp32", model) == pytest.approx(2 * base)    # they do not
    assert op_us(TOPO, op(1_000_000, 10_000_000), "fp32", model) == pytest.approx(base)  # all rows fit


def test_a_small_gather_or_scatter_waits_on_round_trips_and_splits_past_2gib():
    meta = dict(device="meta")
    logits = torch.empty(8192, 128256, dtype=torch.bfloat16, **meta)     # 2.1 GB of offsets: one kernel
    grad = torch.empty(8192, 128256, **meta)                              # 4.2 GB: two
    idx = torch.empty(8192, 1, dtype=torch.int64, **meta)
    out = torch.empty(8192, 1, dtype=torch.bfloat16, **meta)
    gather = launches(aten.gather.default, (logits, 1, idx), [out], (1, 1))
    assert [(k.steps, k.splits) for k in gather] == [(16, 1)]             # 8 elements a thread, 2 trips each
    scatter = launches(aten.scatter_add_.default, (grad, 1, idx, torch.empty(8192, 1, **meta)), [grad], (1, 1))
    assert [(k.steps, k.splits) for k in scatter] == [(16, 2)]            # index, then source; two kernels
    few = launches(aten.gather.default, (logits, 1, idx[:256]), [out[:256]], (1, 1))
    assert few[0].steps == 4                                              # 2 elements a thread
    model = Replay(TOPO, records_doc(1, [[]], {})).model
    floor = model["compute"]["min_kernel_us"]
    def t(k, reuse=10 ** 10):   # as in the vocab solution, after a 4 GB softmax: its round trips go to HBM
        return op_us(TOPO, {"flops": 0, "bytes_read": 1, "bytes_written": 1, "kernels": [k.record()],
                            "reuse_bytes": reuse}, "fp32", model)
    cold_floor = floor + LOAD_LATENCY_US - L2_LATENCY_US
    assert t(gather[0]) == pytest.approx(cold_floor + 15 * LOAD_LATENCY_US)
    assert t(scatter[0]) == pytest.approx(2 * (cold_floor + 15 * LOAD_LATENCY_US))
    assert t(gather[0], reuse=0) == pytest.approx(floor + 15 * L2_LATENCY_US)   # warm: L2 hits
    # the buggy twin, one pass over the bytes, was the floor (9.9 us measured for the gather, 12.3 the scatter)
    assert t(gather[0]) > 5 * floor and t(scatter[0]) > 5 * floor
    # one element a thread still waits for its index, then its source
    assert [k.steps for k in launches(aten.scatter_.src, (grad[:4], 1, idx[:4], torch.empty(4, 1, **meta)),
                                      [grad[:4]], (1, 1))] == [2]


def test_a_slow_paths_step_takes_longer_than_a_bare_round_trip():
    """A step of a cast or strided thread (its load through a dtype switch or computed offset, the store that
    ends it): 0.353 us warm on an H100 where a chain of bare loads waits 0.2 a step (a 4096-element bf16 ->
    float32 copy, 2.21 us against 1.15 for a one-element add), twice that cold. The twin, a gather's steps,
    are bare round trips."""
    model = Replay(TOPO, records_doc(1, [[]], {})).model
    floor = model["compute"]["min_kernel_us"]
    cast = path_launch("cast", [torch.empty(4096, dtype=torch.bfloat16, device="meta")],
                       [torch.empty(4096, device="meta")])
    assert cast["steps"] == 4
    assert kernel_us(TOPO, 0, 0, "fp32", model, launch=cast) == pytest.approx(
        floor + 3 * PATH_STEP_TRIPS * L2_LATENCY_US)
    assert kernel_us(TOPO, 0, 0, "fp32", model, launch=cast, cold=True) == pytest.approx(
        floor + LOAD_LATENCY_US - L2_LATENCY_US + 3 * PATH_STEP_TRIPS * LOAD_LATENCY_US)
    assert PATH_STEP_TRIPS * L2_LATENCY_US == pytest.approx((2.21 - 1.15) / 3)
    assert kernel_us(TOPO, 0, 0, "fp32", model, launch={"steps": 4}) == pytest.approx(floor + 3 * L2_LATENCY_US)


def test_a_transposed_source_reads_a_cache_line_an_element():
    """x.t().contiguous(): a warp's 32 elements lie in 32 lines, 32 clocks of its SM's L1 (H200: a float32
    8192 x 8192 transpose 459 us, 191.7 on the path's rate alone). The twins: a head transpose keeps its last
    dim (a warp reads 128 contiguous bytes), every other column steps 8 bytes, a broadcast row steps 0."""
    meta = dict(device="meta")
    x = torch.empty(8192, 8192, **meta)
    out = torch.empty(8192, 8192, **meta)
    assert path_launch("strided", [x.t()], [out])["lines"] == 8192 * 8192
    assert scattered_reads([x.t(), x], out) == 8192 * 8192           # x + x.t(): the transposed operand
    q = torch.empty(4, 4096, 32, 128, dtype=torch.bfloat16, **meta)
    heads = torch.empty(4, 32, 4096, 128, dtype=torch.bfloat16, **meta)
    assert scattered_reads([q.transpose(1, 2)], heads) == 0
    assert scattered_reads([torch.empty(8192, 16384, **meta)[:, ::2]], out) == 0
    assert scattered_reads([torch.empty(8192, **meta)], out) == 0     # broadcast along the rows
    assert "lines" not in path_launch("strided", [q.transpose(1, 2)], [heads])
    model = Replay(TOPO, records_doc(1, [[]], {})).model
    rec = path_launch("strided", [x.t()], [out])
    from pkbsim.timing.device_kernel import CLOCK_GHZ
    assert kernel_us(TOPO, 0, 0, "fp32", model, launch=rec) == pytest.approx(
        kernel_us(TOPO, 0, 0, "fp32", model, launch=dict(rec, lines=0))
        + 8192 * 8192 / (TOPO.gpu.sms * CLOCK_GHZ * 1e3))


def test_a_gapped_operand_fetches_its_sectors_whole():
    """Every other column of a float32 matrix: a 32-byte sector holds 4 of its elements and 4 it skips, so HBM
    moves twice its bytes (H100: 280.8 us, 191.7 predicted on the path's rate alone, 267.8 with the sectors). The
    twins: a transpose's source is dense (its sectors are used whole, by other warps), a broadcast row reads
    less than its elements, a contiguous operand nothing more."""
    meta = dict(device="meta")
    x = torch.empty(8192, 16384, **meta)
    out = torch.empty(8192, 8192, **meta)
    half = 8192 * 8192 * 4
    assert overfetch([x[:, ::2]], out) == pytest.approx(half, rel=1e-3)
    assert path_launch("strided", [x[:, ::2]], [out])["overfetch"] == overfetch([x[:, ::2]], out)
    assert overfetch([torch.empty(8192, 8192, **meta).t()], out) == 0
    assert overfetch([torch.empty(8192, **meta).expand(8192, 8192)], out) == 0
    assert overfetch([torch.empty(8192, 8192, **meta)], out) == 0
    qkv = torch.empty(4, 4096, 32, 384, dtype=torch.bfloat16, **meta)    # a head's 128 values: a contiguous run
    assert overfetch([qkv[..., :128]], torch.empty(4, 4096, 32, 128, dtype=torch.bfloat16, **meta)) == 0
    assert overfetch([x[:, 0]], torch.empty(8192, **meta)) == 8192 * (32 - 4)       # a column: a sector each
    model = Replay(TOPO, records_doc(1, [[]], {})).model
    rec = path_launch("strided", [x[:, ::2]], [out])
    hbm = TOPO.gpu.hbm_GBps * 1e3 * model["compute"]["memory_efficiency"]
    assert kernel_us(TOPO, 0, 2 * half, "fp32", model, launch=rec) == pytest.approx(
        max((2 * half + rec["overfetch"]) / hbm, kernel_us(TOPO, 0, 0, "fp32", model, launch=rec)))


def test_a_column_of_a_huge_tensor_and_a_triangle():
    meta = dict(device="meta")
    grad = torch.empty(8192, 128256, **meta)
    col = torch.empty(8192, **meta)
    assert path_launch("strided", [grad[:, 0], grad[:, 1]], [col]) == {"path": "strided", "elements": 8192,
                                                                      "lines": 2 * 8192, "overfetch": 2 * 8192 * 28,
                                                                      "steps": 2, "splits": 2}
    half = torch.empty(8192, 128256, dtype=torch.bfloat16, **meta)
    assert path_launch("cast+strided", [half[:, 0]], [col]) == {"path": "cast+strided", "elements": 8192,
                                                              "lines": 8192, "overfetch": 8192 * 30,
                                                              "steps": 4}
    assert path_launch("cast", [torch.empty(8192, dtype=torch.bfloat16, **meta)], [col]) == \
        {"path": "cast", "elements": 8192, "steps": 4}                    # 4 elements a thread, one by one
    assert path_launch("cast", [torch.empty(256, dtype=torch.bfloat16, **meta)], [col[:256]]) == \
        {"path": "cast", "elements": 256, "steps": 2}
    assert splits([2 ** 31 - 1]) == 1 and splits([2 ** 31]) == 2 and splits([5 * 2 ** 31]) == 8
    assert byte_span((4, 3), (3, 1), 4) == 48 and byte_span((4, 3), (0, 1), 2) == 6
    mask = torch.empty(16384, 16384, dtype=torch.bool, **meta)
    tri = launches(aten.triu.default, (mask, 1), [mask], (mask.numel(), mask.numel()))
    assert tri == [Launch(mask.numel(), mask.numel(), "strided", mask.numel(), steps=4)]
    model = Replay(TOPO, records_doc(1, [[]], {})).model
    op = {"flops": 0, "bytes_read": mask.numel(), "bytes_written": mask.numel(), "kernels": [tri[0].record()]}
    one_pass = {k: v for k, v in op.items() if k != "kernels"}
    # H200: 623.9 us measured, 126.8 as one pass over the bytes
    assert op_us(TOPO, op, "bool", model) > 4 * op_us(TOPO, one_pass, "bool", model)


def test_a_nested_tensor_op_runs_and_takes_no_path(tmp_path):
    """kernel_path describes dense strided tensors only: a nested one's op used to ask them for strides inside
    the simulated program (RuntimeError: NestedTensorImpl doesn't support sizes)."""
    prog = tmp_path / "nested.py"
    prog.write_text("import torch\n"
                    "n = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])\n"
                    "m = n * torch.tensor(2.0)\n")
    res = check_script(str(prog), [], RunOptions(nproc=1, record_compute=True, output=io.StringIO()))
    assert not any("raised" in f.render() for f in res.findings), [f.render() for f in res.findings]
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    assert kernel_path(aten.mul.Tensor, [nested, torch.tensor(2.0)], [nested]) is None


def test_a_reduction_pays_the_reduce_kernels_floor_and_one_input_an_output_goes_by_elements():
    """torch's reduce_kernel: about 1 us over the elementwise floor however small (H100: 2.08 and 2.24 us
    against 1.15), and where every reduced dim has size 1 (a sum over a stack of one rank's buffer) a rate in
    elements, not one pass (H200: a [1, 64 Mi] float32 sum 229.8 us, 126.8 as one pass). The twins: a reduction
    over a real extent (one pass), and the record without the rule's fields (the floor, one pass)."""
    meta = dict(device="meta")
    model = Replay(TOPO, records_doc(1, [[]], {})).model
    floor = model["compute"]["min_kernel_us"]

    def t(ks, read, written):
        return op_us(TOPO, {"flops": 0, "bytes_read": read, "bytes_written": written,
                            "kernels": [k.record() for k in ks]}, "fp32", model)
    small = torch.empty(64, 16, **meta)
    ks = launches(aten.sum.dim_IntList, (small, [-1]), [torch.empty(64, **meta)], (4096, 256))
    assert ks == [Launch(4096, 256, kernel="reduce")]
    assert t(ks, 4096, 256) == pytest.approx(floor + REDUCE_FLOOR_EXTRA_US)
    assert op_us(TOPO, {"flops": 0, "bytes_read": 4096, "bytes_written": 256}, "fp32", model) == \
        pytest.approx(floor)                                              # the twin: no rule, the floor
    n = 1 << 26
    one = launches(aten.sum.dim_IntList, (torch.empty(1, n, **meta), [0]), [torch.empty(n, **meta)], (4 * n, 4 * n))
    assert one == [Launch(4 * n, 4 * n, "reduce", n, kernel="reduce")]
    two = launches(aten.sum.dim_IntList, (torch.empty(2, n // 2, **meta), [0]), [torch.empty(n // 2, **meta)],
                   (4 * n, 2 * n))
    assert two == [Launch(4 * n, 2 * n, kernel="reduce")]
    one_pass = op_us(TOPO, {"flops": 0, "bytes_read": 4 * n, "bytes_written": 4 * n}, "fp32", model)
    assert t(one, 4 * n, 4 * n) > 1.3 * one_pass                         # 64 Mi elements at the element rate
    assert t(two, 4 * n, 2 * n) < 0.8 * t(one, 4 * n, 4 * n)             # an extent of 2: one pass
    amax = launches(aten.amax.default, (torch.empty(4096, 1, 4096, **meta), [1]), [torch.empty(4096, 4096, **meta)],
                    (1, 1))
    assert amax[0].path == "reduce" and amax[0].elements == 4096 * 4096
