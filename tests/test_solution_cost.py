"""Issue 19's known-good solutions, timed: a torch op over peer views whose traffic outlasts its work is
link-bound (it was labelled compute-bound, as every copy of the solutions was), and symm_mem's fused GEMMs
overlap their collective as PyTorch's pipeline does (they were timed back to back: exactly 1.00x). Each test
has the old behaviour as its twin."""
import pytest

from pkbsim.screen.cost import bottleneck
from pkbsim.timing.compute import kernel_us
from pkbsim.timing.host_model import host_model
from pkbsim.timing.replay import Replay
from pkbsim.timing.topology import load_topology

TOPO = load_topology("hgx-h100")
MODEL = host_model(None, TOPO)
N = 4
MIB = 1 << 20
GEMM_FLOPS = 2 * 8192 * 8192 * 3584       # ~0.7 ms of bf16 GEMM on an H100 at the default efficiency


def _trace(per_rank) -> dict:
    return {"schema": "pkb.trace/1", "world_size": N,
            "ranks": [{"rank": r, "ops": per_rank(r)} for r in range(N)]}


def _copy(r: int, peer: int, nbytes: int) -> list[dict]:
    """A torch copy_ of `nbytes` into `peer`'s buffer (its own buffer when peer == r)."""
    op = {"kind": "compute", "op": "copy_", "site": "c.py:1", "bytes_read": nbytes, "bytes_written": nbytes,
          "dtype": "float32"}
    if peer != r:
        op["peer_bytes"] = {"read": {}, "write": {str(peer): nbytes}}
    return [op]


@pytest.mark.parametrize("remote, label", [(True, "link-bound"), (False, "compute-bound")])
def test_a_torch_copy_to_a_peer_is_link_bound(remote, label):
    """64 MiB into the next rank's buffer takes the NVLink time, far longer than the copy's own HBM time: the
    critical path is link-bound (before: 'compute-bound'). Its twin, the same copy into local memory, stays
    compute-bound."""
    res = Replay(TOPO, _trace(lambda r: _copy(r, (r + 1) % N if remote else r, 64 * MIB))).run()
    assert bottleneck(res)[0] == label, bottleneck(res)


def _fused(name: str, coll_bytes: int, gemm_first: bool = True):
    def ops(r: int) -> list[dict]:
        mm = {"kind": "compute", "op": name, "site": "f.py:1", "flops": GEMM_FLOPS, "bytes_read": 64 * MIB,
              "bytes_written": 64 * MIB, "dtype": "bfloat16"}
        coll = {"kind": "symm", "op": name, "site": "f.py:1", "group": "0", "seq": 0,
                "group_ranks": list(range(N)), "bytes": coll_bytes}
        return [mm, coll] if gemm_first else [coll, mm]
    return _trace(ops)


def _back_to_back(name: str, coll_bytes: int):
    """The reference's order: the GEMM, then the collective (or the collective, then the GEMM)."""
    coll_op = "reduce_scatter_tensor" if "reduce_scatter" in name else "all_gather_into_tensor"

    def ops(r: int) -> list[dict]:
        mm = {"kind": "compute", "op": "mm", "site": "f.py:1", "flops": GEMM_FLOPS, "bytes_read": 64 * MIB,
              "bytes_written": 64 * MIB, "dtype": "bfloat16"}
        coll = {"kind": "collective", "op": coll_op, "site": "f.py:2", "group": "0", "seq": 0,
                "group_ranks": list(range(N)), "bytes": coll_bytes}
        return [mm, coll]
    return _trace(ops)


@pytest.mark.parametrize("name, coll_bytes", [("fused_all_gather_matmul", 24 * MIB),     # a shard
                                              ("fused_matmul_reduce_scatter", 96 * MIB)])  # the whole input
def test_fused_gemm_hides_its_collective(name, coll_bytes):
    """The fused op ends near its GEMM; its twin, the same GEMM and collective back to back (how the fused op
    was timed before), takes the sum. The fused time never undercuts the GEMM, nor, for the reduce-scatter,
    the GEMM plus its local sum of the ranks' partial chunks."""
    fused = Replay(TOPO, _fused(name, coll_bytes)).run()
    serial = Replay(TOPO, _back_to_back(name, coll_bytes)).run()
    gemm = [k for k in serial.critical_path if k["name"] == "mm"][0]
    gemm_us = gemm["end_us"] - gemm["start_us"]
    assert serial.makespan_us > gemm_us * 1.2                       # the collective is not negligible
    summed = kernel_us(TOPO, 0, coll_bytes * (1 + 1 / N), "bfloat16", MODEL) if "reduce_scatter" in name else 0.0
    assert gemm_us + summed < fused.makespan_us < 0.9 * serial.makespan_us, (fused.makespan_us, serial.makespan_us)
    assert bottleneck(fused)[0] == "compute-bound"


def test_fused_gemm_pairs_whichever_is_recorded_first():
    """A shape run records the fused op's GEMM before its collective, a screen-size run after: same time."""
    name = "fused_all_gather_matmul"
    first = Replay(TOPO, _fused(name, 24 * MIB, gemm_first=True)).run().makespan_us
    second = Replay(TOPO, _fused(name, 24 * MIB, gemm_first=False)).run().makespan_us
    assert first == pytest.approx(second, rel=1e-9)



def test_torchs_one_shot_op_pays_its_barriers():
    """torch.ops.symm_mem.one_shot_all_reduce in a trace runs the one-shot plan with torch's kernel (plain peer
    loads between two barriers: proto Simple, symm_one_shot_base_us), not NCCL's LL one-shot (the old plan, the
    twin): at 8 KiB the difference is the two bases'."""
    from pkbsim.timing.predict import predict

    def ops(r: int) -> list[dict]:
        return [{"kind": "symm", "op": "one_shot_all_reduce", "site": "a.py:1", "group": "0", "seq": 0,
                 "group_ranks": list(range(N)), "bytes": 8192}]
    res = Replay(TOPO, _trace(ops)).run()
    kernel = next(k for k in res.critical_path if k["name"] == "one_shot_all_reduce")
    assert kernel["protocol"] == "Simple"
    ll = predict(TOPO, "all_reduce", 8192, N, algo="one_shot", proto="LL").time_us
    simple = predict(TOPO, "all_reduce", 8192, N, algo="one_shot", proto="Simple").time_us
    assert simple - ll == pytest.approx(TOPO.nccl["symm_one_shot_base_us"] - TOPO.nccl["sym_base_latency_us"][0])
    assert kernel["end_us"] - kernel["start_us"] == pytest.approx(simple, rel=0.01)


def test_a_barrier_replays_as_a_one_element_all_reduce():
    """dist.barrier() in a trace: NCCL's one-element all_reduce (the replay read its record as four fields
    after the collectives' records grew a protocol, and every trace with a barrier failed to replay)."""
    def ops(r: int) -> list[dict]:
        return [{"kind": "collective", "op": "barrier", "site": "b.py:1", "group": "0", "seq": 0,
                 "group_ranks": list(range(N)), "bytes": 0}]
    res = Replay(TOPO, _trace(ops)).run()
    kernel = next(k for k in res.critical_path if k["name"] == "barrier")
    assert kernel["op"] == "all_reduce" and kernel["bytes"] == 4 and res.makespan_us > 0
