"""A simulated rank's GPU looks like a GPU to the program: device queries, device properties, torch.cuda
entries, and per-rank seeding of module construction."""
import torch


def _ok(res, nproc=2, word="fine"):
    assert res.verdict in ("ok", "nothing_checked"), [f.render() for f in res.findings]  # device-only programs
    assert res.output.count(word) == nproc


def test_tensors_answer_as_on_the_rank_gpu(run_program):
    res = run_program("""
        x = torch.randn(4, device="cuda")
        assert x.is_cuda and x.device.type == "cuda" and not x.is_cpu, x.device
        assert x.get_device() == rank and x.device.index == rank and x.device == torch.device("cuda", rank)
        y = x * 2
        assert y.is_cuda and y.get_device() == rank
        z = torch.empty(size=(2,), device=f"cuda:{rank}")
        assert z.device == torch.device("cuda", rank)
        print("fine")
    """)
    _ok(res)


def test_host_tensors_answer_as_host_tensors(run_program):
    res = run_program("""
        x = torch.ones(4, device="cuda")
        h = x.cpu()
        assert h is not x and x.is_cuda
        assert not h.is_cuda and h.is_cpu and h.device.type == "cpu" and h.get_device() == -1, h.device
        h[0] = 5.0
        assert x[0].item() == 1.0                  # a move to the host is a copy, as from a GPU
        assert x.to("cpu").device.type == "cpu" and x.to(device="cpu").device.type == "cpu"
        assert not torch.zeros(3, device="cpu").is_cuda
        assert h.to(torch.float16).device.type == "cpu"
        back = h.cuda()
        assert back is not h and back.is_cuda and back.get_device() == rank
        assert h.to(x.device).is_cuda and x.to(h).device.type == "cpu"
        assert h.cpu() is h and x.cuda() is x
        print("fine")
    """)
    _ok(res)


def test_device_properties_describe_the_modelled_gpu(run_program):
    res = run_program("""
        x = torch.ones(1, device="cuda")
        p = torch.cuda.get_device_properties(x.device)
        assert p.multi_processor_count == 132 and p.name == "NVIDIA H100 80GB HBM3", p
        assert (p.major, p.minor) == (9, 0) and p.L2_cache_size == 50 * 2**20 and p.total_memory >= 80 * 2**30
        assert torch.cuda.get_device_name() == p.name and torch.cuda.current_stream().cuda_stream == 0
        torch.cuda.cudart().cudaProfilerStart()
        print("fine")
    """)
    _ok(res)


def test_cudart_has_the_bindings_of_torch_and_no_others(run_program):
    """torch.cuda.cudart() binds a few runtime calls; cudaMemcpyAsync is not one of them, on a GPU either."""
    good = run_program("""
        free, total = torch.cuda.cudart().cudaMemGetInfo(0)
        assert free <= total and total >= 80 * 2**30
        torch.cuda.cudart().cudaProfilerStop()
        print("fine")
    """)
    _ok(good)
    bad = run_program("""
        x = torch.ones(4, device="cuda")
        torch.cuda.cudart().cudaMemcpyAsync(x.data_ptr(), x.data_ptr(), 16, 3, 0)
    """)
    assert bad.verdict == "error" and "has no attribute 'cudaMemcpyAsync'" in bad.findings[0].message


def test_device_properties_follow_the_topology(run_program):
    res = run_program("""
        p = torch.cuda.get_device_properties(0)
        assert p.multi_processor_count == 108 and p.name == "NVIDIA A100-SXM4-80GB" and p.major == 8, p
        print("fine")
    """, topology="hgx-a100")
    _ok(res)


def test_torch_cuda_calls_without_a_stand_in_are_named_as_not_simulated(run_program):
    res = run_program("""
        g = torch.cuda.CUDAGraph()
    """)
    assert res.verdict == "inconclusive"  # a limit of pkb, not the program's error
    assert "not simulated: torch.cuda.CUDAGraph" in res.findings[0].message


def test_module_construction_uses_the_rank_generator(run_program):
    res = run_program("""
        import torch.nn as nn
        def weights(seed):
            torch.manual_seed(seed)
            return nn.Linear(16, 16).weight.detach().clone()
        a, b, c = weights(7), weights(7), weights(8)
        assert torch.equal(a, b), "same seed, different nn.Linear weights"
        assert not torch.equal(a, c), "different seeds, same nn.Linear weights"
        print("fine")
    """)
    _ok(res)


def test_torch_and_pkbsim_still_see_cpu_tensors(run_program):
    res = run_program("""
        x = torch.ones(4, device="cuda")
        dist.all_reduce(x)                         # the process group's own code checks devices
        out = [torch.empty(4, device="cuda") for _ in range(world)]
        dist.all_gather(out, x)
        objs = [None] * world
        dist.all_gather_object(objs, {"r": rank})
        assert [o["r"] for o in objs] == list(range(world)) and torch.equal(out[1], x)
        assert repr(x).startswith("tensor(")
        print("fine")
    """)
    _ok(res)
    x = torch.ones(1)
    assert x.device.type == "cpu" and not x.is_cuda and x.get_device() == -1  # restored after the run


def test_accelerator_api_module_indices_and_loading_onto_a_gpu(run_program):
    res = run_program("""
        import io, os, torch, torch.distributed as dist, torch.nn as nn
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        acc = torch.accelerator
        assert acc.is_available() and acc.device_count() == world and acc.current_accelerator().type == "cuda"
        assert dist.get_default_backend_for_device(acc.current_accelerator()) == "nccl"
        acc.set_device_index(rank)
        assert acc.current_device_index() == rank and acc.current_stream().cuda_stream == 0
        acc.synchronize()
        assert nn.Linear(2, 2).to(rank).weight.device == torch.device("cuda", rank)
        buf = io.BytesIO()
        torch.save({"w": torch.arange(3.0, device="cuda")}, buf)
        buf.seek(0)
        w = torch.load(buf, map_location=f"cuda:{rank}")["w"]
        assert torch.equal(w, torch.arange(3.0)) and w.is_cuda
        print("fine")
    """, prelude=False)
    _ok(res)


def test_init_process_group_rejects_a_cpu_device_id(run_program):
    res = run_program("""
        import torch, torch.distributed as dist
        dist.init_process_group("nccl", device_id=torch.device("cpu:0"))
    """, prelude=False)
    assert res.verdict == "error" and "cpu" in res.findings[0].message, [f.render() for f in res.findings]
