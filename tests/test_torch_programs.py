"""Patterns of public PyTorch programs (pytorch/examples' distributed scripts) on simulated ranks, each with
a deadlocking twin: a world made by init_device_mesh alone, DDP with device_ids, DTensor on a "cuda" mesh,
tensor-parallel attention (F.scaled_dot_product_attention on DTensors), and a process-wide singleton (hydra)
that each rank initialises."""
import io
import os

import pytest

from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")

MESH_ONLY = """
    import torch, torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cuda", (int(__import__("os").environ["WORLD_SIZE"]),))
    x = torch.ones(4, device="cuda")
    if {skip}:
        dist.all_reduce(x, group=mesh.get_group())
    print("done")
"""


@pytest.mark.parametrize("skip, verdict", [("True", "ok"), ("dist.get_rank() != 0", "deadlock")])
def test_a_world_made_by_init_device_mesh_alone_is_simulated(run_program, skip, verdict):
    res = run_program(MESH_ONLY.format(skip=skip), prelude=False, timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    assert res.ops > 0 and res.wall_s < 30  # not a real gloo world timing out


DDP = """
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(nn.Linear(8, 4).to(rank), device_ids=[rank])
    loss = model(torch.randn(16, 8).to(rank)).sum()
    if {backward}:
        loss.backward()
    print("done")
"""


@pytest.mark.parametrize("backward, verdict", [("True", "ok"), ("rank == 0", "deadlock")])
def test_ddp_with_device_ids_on_a_simulated_gpu(run_program, backward, verdict):
    res = run_program(DDP.format(backward=backward), timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]


DTENSOR = """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard
    mesh = init_device_mesh("cuda", (world,))
    w = torch.randn(8, 4, requires_grad=True)
    d = distribute_tensor(w, mesh, [Shard(0)])
    if {full}:
        assert d.full_tensor().shape == (8, 4)
    d.sum().backward()
    print("done")
"""


@pytest.mark.parametrize("full, verdict", [("True", "ok"), ("rank == 0", "deadlock")])
def test_dtensor_on_a_cuda_mesh_with_autograd(run_program, full, verdict):
    res = run_program(DTENSOR.format(full=full), timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]


def test_each_rank_initialises_its_own_hydra(run_program):
    pytest.importorskip("hydra")
    res = run_program("""
        from hydra.core.global_hydra import GlobalHydra
        from hydra import initialize
        with initialize(version_base=None, config_path=None):
            assert GlobalHydra.instance().is_initialized()
            dist.barrier()
        print("done")
    """, timeout=60)
    assert res.verdict == "ok", [f.render() for f in res.findings]


@pytest.mark.parametrize("argv, verdict", [([], "ok"), (["--rank0-checks-grads"], "deadlock"),
                                           (["--backend", "gloo"], "error")])
def test_tensor_parallel_attention_with_sdpa(argv, verdict):
    """On a "cuda" mesh SDPA reaches the CPU flash kernel here, which DTensor shards like the GPU's kernels;
    on a "cpu" mesh (gloo) torch itself has no strategy for it and the program fails as under torchrun."""
    out = io.StringIO()
    res = check_script(os.path.join(PROGRAMS, "tp_attention.py"), argv, RunOptions(nproc=2, output=out, timeout=60))
    assert res.verdict == verdict, [f.render() for f in res.findings]
    if verdict == "ok":
        assert out.getvalue().count("tp attention matches") == 2
    elif verdict == "deadlock":
        assert res.findings[0].ranks == [0] and "all_gather" in res.findings[0].details[0]
    else:
        assert "_scaled_dot_product_flash_attention_for_cpu" in res.findings[0].message


SDPA_MASK = """
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard, Replicate
    mesh = init_device_mesh("cuda", (world,))
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8, requires_grad=True) for _ in range(3))
    mask = torch.randn(2, 4, 6, 6)
    dq, dk, dv = (distribute_tensor(t, mesh, [Shard(1)]) for t in (q, k, v))
    o = F.scaled_dot_product_attention(dq, dk, dv, attn_mask=distribute_tensor(mask, mesh, [{mask}]))
    o.sum().backward()
    torch.testing.assert_close(o.full_tensor(), F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    print("done")
"""


@pytest.mark.parametrize("mask, verdict", [("Shard(1)", "ok"), ("Replicate()", "inconclusive")])
def test_sdpa_mask_on_a_cuda_mesh(run_program, mask, verdict):
    """A mask placed like q's heads is taken as the GPU's kernels take it; one DTensor would have to
    redistribute is not simulated (the CPU kernel's mask is a keyword argument), never computed otherwise."""
    res = run_program(SDPA_MASK.format(mask=mask), timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    if verdict == "inconclusive":
        assert "attention mask" in res.findings[0].message


@pytest.mark.parametrize("body, named", [
    ("""
        import torch.multiprocessing as mp
        def work(i):
            print("worker", i)
        if __name__ == "__main__":
            mp.spawn(work, nprocs=2)
     """, "torch.multiprocessing.spawn"),
    ("""
        import os, torch.distributed.rpc as rpc
        rpc.init_rpc(f"worker{os.environ['RANK']}", rank=int(os.environ["RANK"]), world_size=2)
        rpc.shutdown()
     """, "torch.distributed.rpc.init_rpc"),
])
def test_own_processes_and_rpc_are_inconclusive(run_program, body, named):
    """pytorch/examples' `python main.py` scripts (mp.spawn) and the rpc/ folder: no real process or RPC agent
    may start under pkb, and the program is not blamed for what pkb does not simulate."""
    res = run_program(body, prelude=False, timeout=60)
    assert res.verdict == "inconclusive", [f.render() for f in res.findings]
    assert named in res.findings[0].message
