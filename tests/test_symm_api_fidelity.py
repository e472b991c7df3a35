"""The symmetric-memory stand-in fails where torch's does. A handle takes no attributes of the program's
own, as the real (pybind) handle: a candidate that caches its peer-pointer table on the handle raised
AttributeError on an H200 and passed the screen (ParallelKernelBench problem 22, Triton tree); its twin
keeps the cache beside the handle. `rendezvous` requires its group (PKB problem 66, gemini CUDA tree, and
Triton-tree 32 called it without one: TypeError on the H200, a pass in the screen); the twin passes it.
`empty` takes no `group` (PKB problem 75, gemini CUDA tree, passed one: TypeError on the H200)."""
import pytest

PROGRAM = """
    import torch.distributed._symmetric_memory as symm_mem
    buf = symm_mem.empty(16, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    {cache}
    print("cached", len(table))
"""

ON_THE_HANDLE = """hdl._ptr_table = torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device="cuda")
    table = hdl._ptr_table"""
BESIDE_IT = """tables = {{id(hdl): torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device="cuda")}}
    table = tables[id(hdl)]"""


@pytest.mark.parametrize("cache,fails", [(ON_THE_HANDLE, True), (BESIDE_IT, False)])
def test_an_attribute_set_on_the_handle_fails_as_on_the_gpu(run_program, cache, fails):
    res = run_program(PROGRAM.replace("{cache}", cache.replace("{{", "{").replace("}}", "}")))
    text = " ".join(f.render() for f in res.findings)
    if fails:
        assert "AttributeError" in text and "_ptr_table" in text, text
        assert res.output.count("cached") == 0
    else:
        assert res.output.count("cached 2") == 2, (res.output, text)


@pytest.mark.parametrize("call,fails", [("symm_mem.rendezvous(buf)", True),
                                        ("symm_mem.rendezvous(buf, dist.group.WORLD)", False)])
def test_rendezvous_needs_its_group_as_on_the_gpu(run_program, call, fails):
    res = run_program(f"""
        import torch.distributed._symmetric_memory as symm_mem
        buf = symm_mem.empty(16, device="cuda")
        hdl = {call}
        print("rendezvous", hdl.world_size)
    """)
    text = " ".join(f.render() for f in res.findings)
    if fails:
        assert "TypeError" in text and "group" in text, text
    else:
        assert res.output.count("rendezvous 2") == 2, (res.output, text)


@pytest.mark.parametrize("call,fails", [('symm_mem.empty(16, device="cuda", group=dist.group.WORLD)', True),
                                        ('symm_mem.empty(16, device="cuda")', False)])
def test_empty_takes_only_torchs_keywords(run_program, call, fails):
    res = run_program(f"""
        import torch.distributed._symmetric_memory as symm_mem
        buf = {call}
        print("allocated", buf.numel())
    """)
    text = " ".join(f.render() for f in res.findings)
    if fails:
        assert "TypeError" in text and "group" in text, text
    else:
        assert res.output.count("allocated 16") == 2, (res.output, text)


@pytest.mark.parametrize("disabled", [True, False])
def test_no_multicast_address_where_torch_gives_none(run_program, monkeypatch, disabled):
    """torch returns multicast_ptr 0 with TORCH_SYMM_MEM_DISABLE_MULTICAST set (a GPU machine with NVLink
    multicast off): PKB gemini-CUDA 13 used it unchecked as a multimem base and faulted on an H200."""
    if disabled:
        monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    else:
        monkeypatch.delenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", raising=False)
    res = run_program("""
        import torch.distributed._symmetric_memory as symm_mem
        buf = symm_mem.empty(16, device="cuda")
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
        print("multicast", "none" if hdl.multicast_ptr == 0 else "some")
    """)
    assert res.output.count("multicast none" if disabled else "multicast some") == 2, res.output
