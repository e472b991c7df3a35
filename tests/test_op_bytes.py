"""The compute trace charges each op the HBM bytes its GPU kernel moves, not every tensor its schema names
(pkbsim/timing/op_bytes.py): an in-place add reads what it overwrites, a zeros_like reads nothing, a gather
reads the elements it gathers, an in-place scatter touches only its elements. The buggy twin is the schema's
count, which the test computes alongside (vocab_parallel_cross_entropy's local work: 2.11x predicted, 1.33x
measured on an H200)."""
import pytest

from pkbsim.timing.op_bytes import nbytes

N = 256 * 1024 * 4  # bytes of one 256 x 1024 float32 tensor


def _ops(res):
    return [op for op in res.traces[0].records if op["kind"] == "compute"]


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    import io
    from pkbsim.world.check import check_script
    from pkbsim.world.launcher import RunOptions
    path = tmp_path_factory.mktemp("op_bytes") / "prog.py"
    path.write_text("""
import torch
import torch.distributed as dist
dist.init_process_group("nccl")
x = torch.randn(256, 1024, device="cuda")
y = torch.randn(256, 1024, device="cuda")
x.add_(y)
z = torch.zeros_like(x)
idx = torch.randint(0, 1024, (256, 1), device="cuda")
g = torch.gather(x, 1, idx)
z.scatter_(1, idx, g)
w = x + y
""")
    res = check_script(str(path), [], RunOptions(nproc=1, output=io.StringIO(), record_compute=True))
    return {op["op"]: op for op in _ops(res)}


def test_an_in_place_op_reads_what_it_overwrites(ops):
    assert (ops["add_"]["bytes_read"], ops["add_"]["bytes_written"]) == (2 * N, N)
    assert (ops["add"]["bytes_read"], ops["add"]["bytes_written"]) == (2 * N, N)   # out of place: as before


def test_a_like_factory_reads_nothing(ops):
    like = [op for name, op in ops.items() if name in ("zeros_like", "empty_like", "zero_", "fill_")]
    assert like and all(op["bytes_read"] == 0 for op in like), like


def test_gather_and_scatter_move_their_elements_not_the_whole_tensor(ops):
    index = 256 * 8
    assert ops["gather"]["bytes_read"] == index + 256 * 4 < N, ops["gather"]
    assert ops["scatter_"]["bytes_read"] == index + 256 * 4 and ops["scatter_"]["bytes_written"] == 256 * 4


def test_a_scattered_scalar_writes_one_element_an_index(tmp_path):
    """`scatter_(dim, index, 2.0)` has no source tensor: it writes one element for each index element (the
    count before took the written elements from a floating source and charged none)."""
    import io
    from pkbsim.world.check import check_script
    from pkbsim.world.launcher import RunOptions
    path = tmp_path / "scalar.py"
    path.write_text("import torch\nz = torch.zeros(256, 1024, device='cuda')\n"
                    "idx = torch.randint(0, 1024, (256, 1), device='cuda')\nz.scatter_(1, idx, 2.0)\n")
    res = check_script(str(path), [], RunOptions(nproc=1, output=io.StringIO(), record_compute=True))
    op = next(op for op in _ops(res) if op["op"] == "scatter_")
    assert (op["bytes_read"], op["bytes_written"]) == (256 * 8, 256 * 4)


def test_the_schema_count_would_charge_more():
    """What the schema alone gives for the gather above (the buggy twin): its whole source."""
    import torch
    x, idx = torch.zeros(256, 1024), torch.zeros(256, 1, dtype=torch.long)
    assert nbytes([x, idx]) == N + 256 * 8
