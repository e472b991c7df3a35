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


CLASS_STACK = """
    import sys
    sys.path.insert(0, {programs!r})
    from class_stack import Registry
    if rank == 1:
        dist.barrier()       # rank 1 pushes after rank 0
    with Registry() as mine:
        if rank == 0:
            dist.barrier()
        dist.barrier()       # both have pushed
        assert Registry._active[-1] is mine or rank == 0
        if rank == 1:
            dist.barrier()   # rank 0 pops first
    if rank == 0:
        dist.barrier()
    print("done")
"""


@pytest.mark.parametrize("per_rank, verdict", [(True, "ok"), (False, "error")])
def test_a_class_level_stack_is_per_rank(run_program, monkeypatch, per_rank, verdict):
    """A stack in a class attribute (tyro's ConstructorRegistry, which torchtitan's config parser enters) is a
    list per rank when listed in rank_singletons.STACKS; unlisted, the ranks pop each other's entries."""
    import pkbsim.standins.rank_singletons as rs
    monkeypatch.syspath_prepend(PROGRAMS)
    if per_rank:
        monkeypatch.setattr(rs, "STACKS", (*rs.STACKS, ("class_stack", "Registry", "_active")))
    res = run_program(CLASS_STACK.format(programs=PROGRAMS), timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    if verdict == "ok":
        assert res.output.count("done") == 2
    else:
        assert "AssertionError" in res.findings[0].message


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


PREMUL = """
    from torch.distributed import _make_nccl_premul_sum
    x = torch.full((4,), float(rank + 1), device="cuda")
    dist.all_reduce(x, op=_make_nccl_premul_sum(0.5 * (rank + 1)))       # sum of 0.5 (r+1)^2
    expect = sum(0.5 * (r + 1) ** 2 for r in range(world))
    assert torch.allclose(x, torch.full((4,), expect, device="cuda")), x
    inp = torch.arange(2.0 * world + {extra}, device="cuda")[:2 * world + {extra}] + rank
    out = torch.empty(2, device="cuda")
    dist.reduce_scatter_tensor(out, inp, op=_make_nccl_premul_sum(torch.tensor(1.0 / world)))   # FSDP2's mean
    want = (torch.arange(2.0 * world) + (world - 1) / 2).reshape(world, 2)[rank]
    assert torch.allclose(out, want.to(out.device)), (out, want)
    assert torch.equal(inp, torch.arange(2.0 * world, device="cuda") + rank)   # the input is not scaled
    print("done")
"""


@pytest.mark.parametrize("extra, verdict", [("0", "ok"), ("(rank == 1) * 3", "mismatch")])
def test_premul_sum(run_program, extra, verdict):
    """ReduceOp.PREMUL_SUM (FSDP2 averages gradients with it): each rank's input times its factor, summed; a
    rank whose reduce-scatter input has another size is a mismatch."""
    res = run_program(PREMUL.format(extra=extra), nproc=3, timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    if verdict == "ok":
        assert res.output.count("done") == 3
    else:   # each rank's own frames, for a collective a library issues
        assert [d.split(" <- ")[0] for d in res.findings[0].details[:2]] == \
            [f"rank {r} is at prog.py:13 in <module>" for r in res.findings[0].ranks], res.findings[0].details


COMPILED_FLEX = """
    import torch.nn as nn
    from torch.nn.attention.flex_attention import flex_attention, create_block_mask
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(16, 48)

        def forward(self, x, mask):
            q, k, v = self.qkv(x).view(2, 32, 3, 2, 8).permute(2, 0, 3, 1, 4)
            return attend(q, k, v, block_mask=mask).sum()

    attend = torch.compile(flex_attention)
    mask = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 32, 32, device="cuda")
    model = DDP(torch.compile(Attn().cuda()), device_ids=[rank])
    model(torch.randn(2, 32, 16, device="cuda"), mask).backward()
    w = model.module.qkv.weight
    grad = w.grad.clone()
    dist.all_reduce(grad)       # DDP averaged the gradients already: every rank holds the same
    assert torch.allclose(grad, w.grad * world, atol=1e-5)
    if {check}:
        dist.all_reduce(grad)
    print("done", type(model.module).__name__)
"""


@pytest.mark.parametrize("check, verdict", [("True", "ok"), ("rank == 0", "deadlock")])
def test_compiled_model_with_flex_attention_backward(run_program, check, verdict):
    """torch.compile runs eagerly on simulated ranks (inductor would compile for the CPU or fail on the simulated
    GPU's properties) and FlexAttention has its GPU backward (torch has none on the CPU): compile_shim.py."""
    res = run_program(COMPILED_FLEX.format(check=check), timeout=120)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    if verdict == "ok":
        assert res.output.count("done OptimizedModule") == 2
    else:
        assert res.findings[0].ranks == [0]


LAZY_LOCK = """
    import sys
    sys.path.insert(0, {programs!r})
    from lazy_lock import Bar, ensure_lock
    if rank == 1:
        with ensure_lock(Bar):
            dist.barrier()      # A: rank 0 makes its bar with the lock rank 1 made
            dist.barrier()      # B
        dist.barrier()          # C: rank 1's ensure_lock has ended
    else:
        dist.barrier()
        bar = Bar()
        dist.barrier()
        dist.barrier()
        bar.close()
    print("done")
"""


@pytest.mark.parametrize("made_first, verdict", [(True, "ok"), (False, "error")])
def test_a_lazily_made_class_lock_outlives_its_maker(run_program, monkeypatch, made_first, verdict):
    """A class-level lock that whoever made it deletes (tqdm's, which the datasets loader in torchtitan uses) is
    made before the run when listed in rank_singletons.LAZY_LOCKS; unlisted, rank 1 deletes rank 0's lock."""
    import pkbsim.standins.rank_singletons as rs
    monkeypatch.syspath_prepend(PROGRAMS)
    if made_first:
        monkeypatch.setattr(rs, "LAZY_LOCKS", (*rs.LAZY_LOCKS, ("lazy_lock", "Bar", "_lock", "get_lock")))
    res = run_program(LAZY_LOCK.format(programs=PROGRAMS), timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    if verdict == "error":
        assert "AttributeError" in res.findings[0].message and res.findings[0].ranks == [0]
    import lazy_lock
    assert "_lock" not in vars(lazy_lock.Bar) or not made_first   # the run's lock is gone after it


LOSS_PARALLEL = """
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard
    from torch.distributed.tensor.parallel import loss_parallel
    mesh = init_device_mesh("cuda", (world,))
    torch.manual_seed(0)
    logits = torch.randn(4, 8, device="cuda", requires_grad=True)
    labels = torch.randint(0, 8, (4,), device="cuda")
    want = F.cross_entropy(logits, labels)
    with loss_parallel():
        dist.barrier()         # every rank is inside before any leaves
        loss = F.cross_entropy(distribute_tensor(logits, mesh, [Shard(1)]), labels)
        loss.backward()
        dist.barrier()
    assert torch.allclose(loss.full_tensor(), want), (loss, want)
    print("done")
"""


@pytest.mark.parametrize("per_rank, verdict", [(True, "ok"), (False, "error")])
def test_loss_parallel_on_every_rank_at_once(run_program, monkeypatch, per_rank, verdict):
    """loss_parallel() fills DTensor's process-wide table of custom op handlers on enter and empties it on exit:
    nested across ranks (rank_singletons.NESTED), the last rank out empties it; otherwise the second rank out
    finds its entries gone (KeyError)."""
    import pkbsim.standins.rank_singletons as rs
    if not per_rank:
        monkeypatch.setattr(rs, "NESTED", ())
    res = run_program(LOSS_PARALLEL, timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    if verdict == "ok":
        assert res.output.count("done") == 2
    else:
        assert "KeyError" in res.findings[0].message


BORG = """
    import sys
    sys.path.insert(0, {programs!r})
    from borg_state import State
    if rank == 1:
        dist.barrier()         # rank 0 makes its state first
    assert State().rank == rank, State().rank
    if rank == 0:
        dist.barrier()
    print("done")
"""


@pytest.mark.parametrize("per_rank, verdict", [(True, "ok"), (False, "error")])
def test_a_borg_state_is_per_rank(run_program, monkeypatch, per_rank, verdict):
    """A class-level dict that instances share as their __dict__ (accelerate's PartialState) is one per rank when
    listed in rank_singletons.SHARED_STATES; unlisted, rank 1 finds rank 0's state."""
    import pkbsim.standins.rank_singletons as rs
    monkeypatch.syspath_prepend(PROGRAMS)
    if per_rank:
        monkeypatch.setattr(rs, "SHARED_STATES", (*rs.SHARED_STATES, ("borg_state", "State", "_shared_state")))
    res = run_program(BORG.format(programs=PROGRAMS), timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    if verdict == "error":
        assert "AssertionError" in res.findings[0].message and res.findings[0].ranks == [1]


AUTOCAST = """
    lin = torch.nn.Linear(8, 4).cuda()
    x = torch.randn(2, 8, device="cuda").half()
    with torch.autocast("cuda", dtype=torch.float16):
        y = lin(x)                 # on the GPU autocast casts the weight too
    assert y.dtype == torch.float16, y.dtype
    dist.all_reduce(y)
    print("done")
"""


@pytest.mark.parametrize("mapped, verdict", [(True, "ok"), (False, "error")])
def test_autocast_cuda_on_a_simulated_gpu(run_program, monkeypatch, mapped, verdict):
    """autocast("cuda") casts a rank's GPU tensors (CPU tensors here) as the GPU would (pkbsim/standins/autocast.py);
    without it, a float16 input meets a float32 weight."""
    import pkbsim.standins.autocast as ac
    if not mapped:
        monkeypatch.setattr(ac, "install_autocast", lambda patches: None)
    res = run_program(AUTOCAST, timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    if verdict == "error":
        assert "dtype" in res.findings[0].message


MOVE_FAKE_MODULE = """
    m = torch.nn.Embedding(10, 4)
    m.to(f"cuda:{{rank}}")         # a module built under the shape run's FakeTensorMode
    x = m(torch.zeros(3, dtype=torch.long, device="cuda")).sum()
    if {reduce}:
        dist.all_reduce(x)
    print("done", tuple(m.weight.shape))
"""


@pytest.mark.parametrize("reduce, verdict", [("True", "ok"), ("rank == 0", "deadlock")])
def test_shape_run_moves_a_module_to_its_gpu(run_program, reduce, verdict):
    """`model.to(device)` in a shape run: torch refuses to swap a fake parameter that its fake-tensor memo holds
    weakly ("Couldn't swap Embedding.weight"); the move to the rank's own GPU changes nothing (shape_run.py)."""
    res = run_program(MOVE_FAKE_MODULE.format(reduce=reduce), shape_run=True, timeout=60)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    if verdict == "ok":
        assert res.output.count("done (10, 4)") == 2


SHAPE_RUN_READS = """
    import numpy as np
    from torch.nn.parallel import DistributedDataParallel as DDP
    data = np.arange(1000, dtype=np.uint16)
    ix = torch.randint(len(data) - 8, (4,))                  # small: drawn on data
    x = torch.stack([torch.from_numpy(data[i:i + 8].astype(np.int64)) for i in ix])
    assert x.shape == (4, 8) and bool((x[:, 1] - x[:, 0] == 1).all()), x
    model = DDP(torch.nn.Linear(512, 512).cuda(), device_ids=[rank])   # 262144 weights: fake
    loss = model(torch.randn(4, 512, device="cuda")).sum()
    loss.backward()
    value = loss.item()                                      # no data behind it: a stand-in
    print(f"loss {{loss:.2f}}")
    if {cond}:
        dist.all_reduce(torch.tensor([value], device="cuda"))
    print("done")
"""


@pytest.mark.parametrize("cond, verdict", [("True", "ok"), ("rank == 0", "deadlock")])
def test_shape_run_reads_values(run_program, cond, verdict):
    """A shape run runs small tensors on data (random indices into a numpy array), checks DDP's parameters across
    ranks, and answers a read of a large tensor's value (`loss.item()`, `f"{loss:.2f}"`) with a stand-in it names
    (shape_run.py, as `pkb check --shape-run` runs it); a collective that only rank 0 calls is still a deadlock."""
    res = run_program(SHAPE_RUN_READS.format(cond=cond), shape_run=True, shape_run_values=True, timeout=120)
    assert res.verdict == verdict, [f.render() for f in res.findings]
    notes = [f for f in res.findings if f.kind == "stand_in"]
    assert notes and notes[0].sites == ["prog.py:15"] and "1.0" in notes[0].message, [f.render() for f in notes]
    if verdict == "ok":
        assert res.output.count("loss 1.00") == 2 and res.output.count("done") == 2
