"""topk on a simulated GPU returns contiguous values and indices, as torch's CUDA topk does: a kernel that walks
them by raw pointer (ParallelKernelBench 80_dinov2_distributed_knn, gemini-3-pro CUDA, scatters each row's k
entries) read other rows' entries from the narrowed view pkb returned before, and was rejected as a wrong
output that an H200 scored correct. The twin is a row-major walk of a contiguous copy, which both agree on."""
import textwrap

from pkb.cli.main import main

PROGRAM = textwrap.dedent("""
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl")
    torch.cuda.set_device(dist.get_rank())
    x = torch.arange(12.0, device="cuda").view(3, 4).flip(1)
    top = torch.topk(x, 2)
    flat = TAKE.reshape(-1)           # what a kernel reading k entries per row from the base pointer sees
    walked = torch.as_strided(flat, (3, 2), (2, 1))
    assert torch.equal(walked, top.values), (walked, top.values)
    dist.all_reduce(torch.ones(1, device="cuda"))
""")


def check(tmp_path, take: str) -> int:
    script = tmp_path / "topk_walk.py"
    script.write_text(PROGRAM.replace("TAKE", take))
    return main(["check", "--nproc-per-node", "2", str(script)])


def test_topk_values_are_contiguous_for_a_pointer_walk(tmp_path):
    assert check(tmp_path, "torch.as_strided(top.values, (6,), (1,))") == 0


def test_a_contiguous_copy_walks_the_same(tmp_path):
    assert check(tmp_path, "top.values.contiguous()") == 0
