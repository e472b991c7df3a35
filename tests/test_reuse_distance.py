"""Reuse distance (pkbsim/timing/reuse.py, compute.cold_inputs): a small op whose inputs were touched a few
bytes ago waits L2 round trips, the same op after a kernel that moved more than the L2 holds waits HBM ones (on
an H200 a gather of one logit a row: 4.4 us warm, 9.6 after a 512 MiB read)."""
import io

import pytest

from pkbsim.timing.compute import cold_inputs, op_us
from pkbsim.timing.device_kernel import L2_LATENCY_US, LOAD_LATENCY_US
from pkbsim.timing.host_model import host_model
from pkbsim.timing.topology import load_topology
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions
from pkbsim.timing.reuse import ReuseTracker

TOPO = load_topology("hgx-h200")
MODEL = host_model()

PROGRAM = """
import torch
dev = "cuda"
y = torch.randn(64, device=dev)
big = torch.empty(64 << 20, device=dev)
col = torch.empty(4096, 4096, device=dev)
warm = y + 1
big.fill_(1.0)
cold = y + 1
col.fill_(2.0)
first = col[:, 0] * 2
sparse = col[:8, 0].clone()
again = col[:8, 0].clone()
"""


def _records(tmp_path) -> dict:
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    res = check_script(str(path), [], RunOptions(nproc=1, record_compute=True, output=io.StringIO()))
    recs = [r for r in res.traces[0].records if r.get("kind") == "compute"]
    assert recs, [f.render() for f in res.findings]
    lines = PROGRAM.strip().splitlines()
    return {lines[int(r["site"].rsplit(":", 1)[1]) - 2].split(" = ")[0]: r for r in recs
            if r["site"].startswith("prog.py")}


def test_a_small_op_after_a_large_kernel_waits_hbm_round_trips_and_its_warm_twin_l2_ones(tmp_path):
    ops = _records(tmp_path)
    warm, cold = ops["warm"], ops["cold"]
    assert warm["reuse_bytes"] < TOPO.gpu.l2_MB * 1e6 < cold["reuse_bytes"]   # 256 MiB written between
    assert not cold_inputs(TOPO, warm) and cold_inputs(TOPO, cold)
    assert op_us(TOPO, cold, "fp32", MODEL) - op_us(TOPO, warm, "fp32", MODEL) == pytest.approx(
        LOAD_LATENCY_US - L2_LATENCY_US)


def test_a_column_of_a_tensor_a_large_kernel_just_wrote_is_cold_and_a_few_lines_just_read_are_warm(tmp_path):
    """The fill streamed 64 MiB over `col`: its first column is that much older than its last line. A clone of
    eight of its elements touches eight lines, so the same eight read again right after are warm."""
    ops = _records(tmp_path)
    assert ops["first"]["reuse_bytes"] > TOPO.gpu.l2_MB * 1e6
    assert ops["again"]["reuse_bytes"] < 1 << 10


def test_an_input_from_outside_the_program_is_as_far_as_the_program_has_moved():
    """It was touched before the program began; a record without a distance (an older or hand-written trace)
    is warm, as the calibrated floor is."""
    import torch
    tracker = ReuseTracker()
    seen, unseen = torch.ones(4), torch.ones(4)
    tracker.touch(100, [seen], 16)
    assert tracker.distance(116, [seen]) == 32
    assert tracker.distance(116, [seen, unseen]) == 116 and tracker.distance(116, []) == 0
    assert not cold_inputs(TOPO, {"bytes_read": 16})
    assert cold_inputs(TOPO, {"bytes_read": 16, "reuse_bytes": 10 ** 9})
