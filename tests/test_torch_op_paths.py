"""An elementwise torch op's CUDA kernel path: the world records it (pkbsim/timing/kernel_path.py) and the
replay times the slower paths by the elements they write (pkbsim/timing/compute.py PATH_ELEMENTS_PER_SM_US).

On an H200 a bf16 -> float32 copy (unrolled, loads with a cast) took 191.7 us where the float32 -> bf16 copy of
the same tensor (vectorised) took 94.0, and `x * weight` with weight broadcast over the rows
(elementwise_kernel with offset calculators) 164.8 us where the roofline said 63.4: about the bf16 -> float32
copy's time for as many elements, at half the bytes. Each test has a buggy twin: the trace as the world
recorded it before (no path), which times these ops as their vectorised twins.
"""
from __future__ import annotations

import io

import pytest
import torch

from pkbsim.timing.compute import PATH_ELEMENTS_PER_SM_US
from pkbsim.timing.replay import Replay
from pkbsim.timing.topology import load_topology
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions
from pkbsim.timing.kernel_path import kernel_path

TOPO = load_topology("hgx-h200")
aten = torch.ops.aten

PROGRAM = """
import torch
x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
w = torch.randn(2048, device="cuda", dtype=torch.bfloat16)
y = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
up = x.float()                      # line 6: bf16 -> float32, cast
down = up.to(torch.bfloat16)        # line 7: float32 -> bf16, vectorised
scaled = x * w                      # line 8: w broadcast over the rows, strided
summed = x + y                      # line 9: contiguous, same dtype, vectorised
up += x                             # line 10: float32 += bf16, cast
half = x[:, :1024] * 2.0            # line 11: a column slice, strided
two = x * torch.tensor(2.0, device="cpu")   # line 12: a host scalar is the kernel's argument, vectorised
"""
EXPECTED = {6: "cast", 7: None, 8: "strided", 9: None, 10: "cast", 11: "strided", 12: None}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("paths") / "prog.py"
    path.write_text(PROGRAM)
    res = check_script(str(path), [], RunOptions(nproc=1, record_compute=True, output=io.StringIO()))
    ops = [r for r in res.traces[0].records if r.get("kind") == "compute"]
    assert ops, [f.render() for f in res.findings]
    return {"schema": "pkb.trace/1", "world_size": 1, "ranks": [{"rank": 0, "ops": ops}]}


def _line(op) -> int:
    return int(op["site"].rsplit(":", 1)[1])


def _durations(doc) -> dict[int, float]:
    """Device time of each traced line's kernel in the replay."""
    replay = Replay(TOPO, doc)
    replay.run()
    ops = [op for op in doc["ranks"][0]["ops"]]
    lines = {op["op"]: [] for op in ops}
    for op in ops:
        lines[op["op"]].append(_line(op))
    out = {}
    for k in replay.kernels:
        if k.kind == "compute":
            out[lines[k.name].pop(0)] = k.end - k.start
    return out


def _old_world(doc) -> dict:
    """The buggy twin: the same trace as the world recorded it before, with no kernel path."""
    return {**doc, "ranks": [{"rank": 0, "ops": [{k: v for k, v in op.items() if k not in ("path", "elements")}
                                                for op in doc["ranks"][0]["ops"]]}]}


def test_the_world_records_each_elementwise_ops_kernel_path(trace):
    ops = {_line(op): op for op in trace["ranks"][0]["ops"] if _line(op) in EXPECTED}
    assert {n: op.get("path") for n, op in ops.items()} == EXPECTED
    # a slow path's elements are those it writes: the output's
    assert {n: op["elements"] for n, op in ops.items() if op.get("path")} == \
        {6: 2048 * 2048, 8: 2048 * 2048, 10: 2048 * 2048, 11: 2048 * 1024}
    # GEMMs, reductions and factories take no path
    assert all("path" not in op for op in trace["ranks"][0]["ops"] if op["op"] in ("randn", "mm", "sum"))


def test_a_slow_path_goes_by_its_elements_not_its_bytes(trace):
    fixed, buggy = _durations(trace), _durations(_old_world(trace))
    ops = {_line(op): op for op in trace["ranks"][0]["ops"]}
    moved = {n: ops[n]["bytes_read"] + ops[n]["bytes_written"] for n in EXPECTED}
    assert moved[6] == moved[7] and moved[8] == pytest.approx(moved[9] * 2 / 3, rel=0.01)
    rate = TOPO.gpu.sms * PATH_ELEMENTS_PER_SM_US
    for n in (6, 8, 10, 11):   # each at the element rate, slower than its bytes at full bandwidth
        assert fixed[n] == pytest.approx(ops[n]["elements"] / rate, rel=0.01)
        assert fixed[n] > buggy[n] * (1.05 if n == 10 else 1.5)      # the bug: timed by its bytes
    # the copies move the same bytes: bf16 -> float32 is ~2x float32 -> bf16 (H200: 191.7 vs 94.0 us)
    assert 1.7 < fixed[6] / fixed[7] < 2.5
    assert buggy[6] == pytest.approx(buggy[7], rel=0.01)
    # a bf16 broadcast multiply takes what a float32 one of as many elements would: the bytes do not count
    assert fixed[8] == pytest.approx(fixed[6], rel=0.01)
    # vectorised ops are timed as before
    for n in (7, 9, 12):
        assert fixed[n] == pytest.approx(buggy[n], rel=1e-6)


@pytest.mark.parametrize("device", ["cpu", "meta"])   # screen size: real tensors; a shape run: meta/fake ones
def test_kernel_path_from_strides_and_dtypes(device):
    def t(*shape, dtype=torch.bfloat16):
        return torch.empty(*shape, dtype=dtype, device=device)
    x, w, f = t(64, 128), t(128), t(64, 128, dtype=torch.float32)
    mask = t(64, 128, dtype=torch.bool)
    assert kernel_path(aten._to_copy.default, [x], [f]) == "cast"
    assert kernel_path(aten._to_copy.default, [f], [x]) is None               # vectorised float32 -> bf16
    assert kernel_path(aten.copy_.default, [f], [t(64, 128, dtype=torch.float16)]) is None
    assert kernel_path(aten._to_copy.default, [mask], [f]) == "cast"
    assert kernel_path(aten.mul.Tensor, [x, w], [t(64, 128)]) == "strided"
    assert kernel_path(aten.mul.Tensor, [x, x], [t(64, 128)]) is None
    assert kernel_path(aten.add_.Tensor, [x], [f]) == "cast"
    assert kernel_path(aten.mul.Tensor, [f, mask], [t(64, 128, dtype=torch.float32)]) == "cast"
    assert kernel_path(aten.where.self, [mask, x, x], [t(64, 128)]) is None     # a condition is not cast
    assert kernel_path(aten.gt.Tensor, [x, x], [mask]) is None
    assert kernel_path(aten.clone.default, [x.t()], [t(128, 64)]) == "strided"
    assert kernel_path(aten.neg.default, [x.t()], [t(64, 128).t()]) is None    # permuted alike: dense
    assert kernel_path(aten.mul.Tensor, [x[:, :64]], [t(64, 64)]) == "strided"
    assert kernel_path(aten.mul.Tensor, [x, t(64, 128, dtype=torch.float32)[:, :1].expand(64, 128)],
                       [t(64, 128, dtype=torch.float32)]) == "cast+strided"
    # not elementwise: no path whatever the operands
    assert kernel_path(aten.mm.default, [x.t(), f], [f]) is None
    assert kernel_path(aten.sum.dim_IntList, [x.t()], [t(128)]) is None
