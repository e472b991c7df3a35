"""Races are found per 2-byte element: two ranks storing adjacent bf16 elements of a peer's buffer with no
ordering between them do not collide (a 4-byte shadow word made that a write-write race: ParallelKernelBench
86_distributed_sample_sort, gemini-3-pro CUDA, whose ranks fill disjoint byte ranges [0, 6) and [6, 24) of a
peer's bucket); both storing the same element is the race it is. And topk's outputs are contiguous, as torch's
(a kernel that walks them by pointer read other rows' entries from a narrowed view: its 80_dinov2 k-NN)."""
import textwrap

from pkb.cli.main import main

STORE = textwrap.dedent("""
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    buf = symm_mem.empty(8, dtype=torch.bfloat16, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    buf.zero_()
    hdl.barrier(channel=0)
    peer = hdl.get_buffer(0, [8], torch.bfloat16)
    peer[ELEMENT] = rank + 1          # into rank 0's buffer, no ordering between the ranks' stores
    hdl.barrier(channel=0)
    assert tuple(torch.topk(torch.arange(12.0, device="cuda").view(3, 4), 2).values.stride()) == (2, 1)
""")


def check(tmp_path, element: str) -> int:
    script = tmp_path / "adjacent.py"
    script.write_text(STORE.replace("ELEMENT", element))
    return main(["check", "--nproc-per-node", "2", str(script)])


def test_adjacent_bf16_stores_of_two_ranks_do_not_collide(tmp_path, capsys):
    assert check(tmp_path, "rank") == 0, capsys.readouterr().out


def test_two_ranks_storing_one_element_collide(tmp_path, capsys):
    assert check(tmp_path, "0") == 3
    assert "write-write race" in capsys.readouterr().out
