"""Pinned host memory asked through a factory's `pin_memory=True` (a ParallelKernelBench candidate's
`torch.tensor(meta, pin_memory=True)`) works on simulated ranks, as `.pin_memory()` does: the CPU build of
torch has no pinned allocator and raised, which was reported as the candidate's error."""


def test_factories_with_pin_memory_true_run(run_program):
    res = run_program("""
    meta = torch.tensor([1, 2, 3], dtype=torch.int64, pin_memory=True)
    buf = torch.empty(3, dtype=torch.int64, pin_memory=True).copy_(meta)
    z = torch.zeros(3, dtype=torch.int64, pin_memory=True).pin_memory()
    dev = buf.to("cuda", non_blocking=True) + z.cuda()
    dist.all_reduce(dev)
    assert dev.tolist() == [2 * world // 2 * v for v in (1, 2, 3)]
    """)
    assert res.verdict == "ok", res.output
