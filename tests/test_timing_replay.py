"""Trace replay: rendezvous, streams and events, p2p and signals, the critical path, and real traces."""
import json

import pytest

from pkbsim.timing import chrome_trace
from pkbsim.timing.predict import predict
from pkbsim.timing.replay import Replay
from pkbsim.timing.topology import load_topology
from pkbsim.timing.trace_ops import TraceError
from pkbsim.world.trace import write_trace

H100 = load_topology("hgx-h100")
LAUNCH = 4.2   # data/host.toml torch_eager_us
MIB = 1 << 20


def mm(flops, stream=0, site="m.py:1"):
    return {"kind": "compute", "op": "mm", "site": site, "stream": stream, "flops": flops, "bytes_read": 0,
            "bytes_written": 0}


def ar(seq, nbytes, ranks, stream=0, group="0"):
    return {"kind": "collective", "op": "all_reduce", "site": "m.py:2", "stream": stream, "group": group, "seq": seq,
            "group_ranks": ranks, "bytes": nbytes}


def doc(per_rank):
    return {"schema": "pkb.trace/1", "world_size": len(per_rank),
            "ranks": [{"rank": r, "ops": [dict(op, i=i, t_us=0.0) for i, op in enumerate(ops)]}
                      for r, ops in enumerate(per_rank)]}


def gemm_us(flops):
    return flops / (H100.gpu.peak_tflops["bf16"] * 1e12 * 0.7) * 1e6


def test_collective_waits_for_the_slowest_rank_and_the_path_crosses_ranks():
    big = 4e12
    res = Replay(H100, doc([[ar(0, 64 * MIB, [0, 1])], [mm(big), ar(0, 64 * MIB, [0, 1])]])).run()
    coll = predict(H100, "all_reduce", 64 * MIB, 2).time_us
    start = LAUNCH + gemm_us(big)   # rank 1's second launch hides behind its GEMM
    assert res.makespan_us == pytest.approx(start + coll, rel=1e-6)
    path = [(c["rank"], c["name"]) for c in res.critical_path]
    assert path[:2] == [(1, "mm"), (1, "all_reduce")] and {n for _, n in path[2:]} <= {"all_reduce"}
    rank0 = next(k for k in res.replay.kernels if k.rank == 0)
    assert rank0.start == pytest.approx(LAUNCH) and rank0.pred.rank == 1   # the early rank spins, as NCCL's kernel does


def test_streams_overlap_and_events_order_them():
    side = [mm(1e12, stream=7), {"kind": "stream", "op": "event_record", "site": "", "stream": 7, "event": 1},
            {"kind": "stream", "op": "wait_event", "site": "", "stream": 0, "event": 1}, mm(1e12)]
    res = Replay(H100, doc([side])).run()
    k = {(x.stream, x.name): x for x in res.replay.kernels if x.kind == "compute"}
    assert k[(0, "mm")].start == pytest.approx(k[(7, "mm")].end)      # the wait_event edge holds stream 0 back
    free = [mm(1e12, stream=7), mm(1e12)]
    res2 = Replay(H100, doc([free])).run()
    assert res2.makespan_us < res.makespan_us                           # without the edge they overlap


def test_comm_and_compute_overlap_shares_sms():
    alone = Replay(H100, doc([[mm(2e12)], [mm(2e12)]])).run().makespan_us
    with_comm = [[ar(0, 512 * MIB, [0, 1], stream=3), mm(2e12)], [ar(0, 512 * MIB, [0, 1], stream=3), mm(2e12)]]
    res = Replay(H100, doc(with_comm)).run()
    gemm = next(k for k in res.replay.kernels if k.name == "mm")
    assert gemm.end - gemm.start > (alone - LAUNCH) * 1.05                # stretched by the NCCL channels' SMs


def test_p2p_pairs_in_order_and_batches_are_one_kernel():
    send = lambda peer, n, b=False: {"kind": "p2p", "op": "send", "site": "", "stream": 0, "group": "0",
                                     "peer": peer, "bytes": n, "batched": b}
    recv = lambda peer, n, b=False: dict(send(peer, n, b), op="recv")
    res = Replay(H100, doc([[send(1, 8 * MIB, True), recv(1, 8 * MIB, True)],
                            [send(0, 8 * MIB, True), recv(0, 8 * MIB, True)]])).run()
    assert [len([k for k in res.replay.kernels if k.rank == r]) for r in (0, 1)] == [1, 1]
    lone = predict(H100, "sendrecv", 8 * MIB, 2).time_us
    assert res.makespan_us == pytest.approx(LAUNCH + lone, rel=1e-6)     # both directions at once, full duplex
    hung = Replay(H100, doc([[send(1, 8 * MIB)], []])).run()
    assert len(hung.unfinished) == 1 and "never finished" in hung.notes[-1]


def test_signals_release_waits_in_order():
    put = {"kind": "symm", "op": "put_signal", "site": "", "stream": 0, "group": "0", "peer": 1, "channel": 0}
    wait = {"kind": "symm", "op": "wait_signal", "site": "", "stream": 0, "group": "0", "peer": 0, "channel": 0}
    res = Replay(H100, doc([[mm(3e12), put], [wait, mm(1e9)]])).run()
    w = next(k for k in res.replay.kernels if k.name == "wait_signal")
    p = next(k for k in res.replay.kernels if k.name == "put_signal")
    assert w.end == pytest.approx(p.end) and w.pred is p
    assert [(c["rank"], c["name"]) for c in res.critical_path] == [(0, "mm"), (0, "put_signal"),
                                                                   (1, "wait_signal"), (1, "mm")]


def test_a_symm_barrier_is_one_kernel_launch_not_one_per_signal():
    """hdl.barrier() is one kernel on a GPU: its put/wait signals to every peer share one launch."""
    def barrier(rank, ident):
        sig = {"kind": "symm", "site": "", "stream": 0, "group": "0", "channel": 0}
        extra = {} if ident is None else {"barrier": ident}
        return ([{**sig, "op": "put_signal", "peer": p, **extra} for p in range(4)]
                + [{**sig, "op": "wait_signal", "peer": p, **extra} for p in range(4)])
    one = Replay(H100, doc([barrier(r, 1) for r in range(4)])).run()
    eight = Replay(H100, doc([barrier(r, None) for r in range(4)])).run()   # 8 separate signal calls
    assert one.makespan_us < LAUNCH + 8 * 1.0                               # one launch, then the signals
    assert eight.makespan_us >= 8 * LAUNCH                                  # the host launched each signal


def test_links_and_perfetto_timeline(tmp_path):
    res = Replay(H100, doc([[ar(0, 256 * MIB, list(range(4)))] for _ in range(4)])).run()
    assert res.links and all(0 < lk["utilisation"] <= 1 + 1e-9 for lk in res.links)
    path = tmp_path / "t.json"
    chrome_trace.write(str(path), res)
    events = json.loads(path.read_text())["traceEvents"]
    assert {e["ph"] for e in events} >= {"M", "X", "C"}
    kernels = [e for e in events if e["ph"] == "X"]
    assert len(kernels) == 4 and all(e["args"].get("algorithm") for e in kernels)
    assert any(e["name"].endswith("->nvswitch") for e in events if e["ph"] == "C")


def test_bad_traces_are_rejected():
    with pytest.raises(TraceError, match="not a pkb.trace/1 document"):
        Replay(H100, {"schema": "other"})
    with pytest.raises(TraceError, match="holds 8 GPUs"):
        Replay(H100, dict(doc([[]] * 9)))


def test_a_recorded_trace_replays(run_program, tmp_path):
    res = run_program("""
        x = torch.randn(256, 256, device="cuda")
        y = x @ x
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            dist.all_reduce(y)
        torch.cuda.current_stream().wait_stream(s)
        out = torch.empty(world * 256, 256, device="cuda")
        dist.all_gather_into_tensor(out, y)
        if rank == 0:
            dist.send(y, 1)
        elif rank == 1:
            dist.recv(y, 0)
        torch.cuda.synchronize()
    """, nproc=4, record_compute=True)
    assert res.verdict == "ok"
    path = tmp_path / "trace.json"
    write_trace(str(path), res.world_size, res.traces, {})
    rep = Replay(H100, json.loads(path.read_text())).run()
    names = [c["name"] for c in rep.critical_path]
    assert not rep.unfinished and "all_reduce" in names and "all_gather_into_tensor" in names
    assert rep.makespan_us > predict(H100, "all_gather", 4 * 256 * 256 * 4, 4).time_us


def test_calibration_files_override_the_constants(tmp_path):
    from pkbsim.timing.host_model import host_model

    toml = tmp_path / "c.toml"
    toml.write_text("[compute]\nmatmul_efficiency = 0.35\n")
    slow = Replay(H100, doc([[mm(4e12)]]), calibration=str(toml)).run()
    assert slow.makespan_us == pytest.approx(LAUNCH + 2 * gemm_us(4e12), rel=1e-6)
    measured = {"schema": "pkb.calibration/1", "gpus": 8, "gemm": {"bf16": {"n": 8192, "tflops": 742.05}},
                "hbm_copy": {"GBps_read_plus_write": 2680.0},
                "collectives": [{"op": "all_reduce", "bytes": 128, "mode": "eager", "time_us": 25.0}]}
    js = tmp_path / "c.json"
    js.write_text(json.dumps(measured))
    model = host_model(str(js), H100)
    assert model["compute"]["matmul_efficiency"] == pytest.approx(0.75)
    assert model["compute"]["memory_efficiency"] == pytest.approx(0.8)
    assert model["launch"]["torch_eager_us"] == pytest.approx(25.0 - predict(H100, "all_reduce", 128, 8).time_us)
    toml.write_text("[gpu]\nx = 1\n")
    with pytest.raises(ValueError, match="unknown table"):
        host_model(str(toml))


def test_compute_dtype_picks_the_peak():
    fp32 = Replay(H100, doc([[dict(mm(1e12), dtype="float32")]])).run().makespan_us
    bf16 = Replay(H100, doc([[mm(1e12)]])).run().makespan_us   # traces without a dtype: data/host.toml default
    assert (fp32 - LAUNCH) / (bf16 - LAUNCH) == pytest.approx(989.4 / 67.0)


def _compute_ops(res, rank=0):
    return [op for op in res.traces[rank].records if op["kind"] == "compute"]


@pytest.mark.parametrize("shape_run", [False, True])
def test_rms_norm_is_one_kernel_and_metadata_queries_are_none(run_program, shape_run):
    res = run_program("""
        import torch.nn.functional as F
        x = torch.randn(64, 128, device="cuda")
        y = F.rms_norm(x, (128,), eps=1e-5)
        r = torch.ops.aten.rms_norm(x, [128], None, 1e-5)   # below F.rms_norm: decomposed, as on the CPU
        z = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-5)
    """, nproc=1, record_compute=True, shape_run=shape_run)
    assert res.verdict == "nothing_checked"                            # one rank, torch ops only: no communication
    names = [op["op"] for op in _compute_ops(res)]
    fused = [op for op in _compute_ops(res) if op["op"] == "rms_norm"]
    assert len(fused) == 1 and fused[0]["bytes_read"] == fused[0]["bytes_written"] == 64 * 128 * 4
    assert "device" not in names                                       # a metadata query launches nothing
    assert names.count("pow") == names.count("rsqrt") == 2              # spelled out, RMSNorm stays five kernels


def test_a_one_rank_in_place_collective_moves_nothing():
    gather = {"kind": "collective", "op": "all_gather_into_tensor", "site": "m.py:3", "stream": 0, "group": "0",
              "seq": 1, "group_ranks": [0], "bytes": 256 * MIB}
    copy_us = 2 * 256 * MIB / (H100.gpu.hbm_GBps * 1e3)
    alone = Replay(H100, doc([[gather]])).run().makespan_us
    after_all_reduce = Replay(H100, doc([[ar(0, 256 * MIB, [0]), gather]])).run().makespan_us
    assert alone == pytest.approx(LAUNCH + copy_us)             # out of place: a copy
    assert after_all_reduce == pytest.approx(alone + LAUNCH)      # in place: its launch, no copy
