"""Every torch.distributed operation runs with NCCL semantics on simulated ranks."""
import io
import os

import pytest

from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

from conftest import HERE


@pytest.mark.parametrize("nproc", [2, 3, 4, 8])
def test_all_ops_program(nproc):
    out = io.StringIO()
    res = check_script(os.path.join(HERE, "programs", "all_ops.py"), [], RunOptions(nproc=nproc, output=out))
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert out.getvalue().count("all ops ok") == nproc


def test_ranks_have_their_own_env_module_state_and_rng(run_program):
    res = run_program("""
        import random
        COUNTER = []
        COUNTER.append(rank)
        assert COUNTER == [rank], COUNTER          # module state does not leak between ranks
        assert os.environ["RANK"] == str(rank) and os.environ["WORLD_SIZE"] == str(world)
        os.environ["MINE"] = str(rank)
        dist.barrier()
        assert os.environ["MINE"] == str(rank)     # environment writes stay on the rank
        torch.manual_seed(1234 + rank)
        a = torch.randn(4, device="cuda")
        torch.manual_seed(1234 + rank)
        b = torch.randn(4, device="cuda")
        assert torch.equal(a, b)                   # each rank owns its generator
        assert torch.cuda.current_device() == rank and torch.cuda.device_count() == world
        x = torch.ones(2).cuda().to("cuda:0").to(rank)
        assert x.device == torch.device("cuda", rank)  # the program sees its GPU (device_identity.py)
        print("fine")
    """, nproc=4)
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert res.output.count("fine") == 4


def test_streams_events_and_synchronize_work(run_program):
    res = run_program("""
        s = torch.cuda.Stream()
        x = torch.ones(4, device="cuda")
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(s)
        y = x * 2
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(); end.record(); torch.cuda.synchronize()
        assert start.elapsed_time(end) >= 0
        assert torch.equal(y, torch.full((4,), 2.0 * world))
    """)
    assert res.verdict == "ok", [f.render() for f in res.findings]
