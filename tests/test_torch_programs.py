"""Patterns of public PyTorch programs (pytorch/examples' distributed scripts) on simulated ranks, each with
a deadlocking twin: a world made by init_device_mesh alone, DDP with device_ids, DTensor on a "cuda" mesh,
and a process-wide singleton (hydra) that each rank initialises."""
import pytest

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
