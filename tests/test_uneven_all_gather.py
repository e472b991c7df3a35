"""dist.all_gather with a list of outputs takes a different size from each rank (NCCL broadcasts each part
when the sizes differ); a rank expecting a size its peer does not send, or another dtype, is a mismatch."""


def test_each_rank_sends_its_own_size(run_program):
    res = run_program("""
        parts = [torch.empty(r + 1, device="cuda") for r in range(world)]
        dist.all_gather(parts, torch.full((rank + 1,), float(rank), device="cuda"))
        assert [p.tolist() for p in parts] == [[float(r)] * (r + 1) for r in range(world)]
    """, nproc=3)
    assert res.verdict == "ok", res.findings


def test_a_size_the_peer_does_not_send_is_a_mismatch(run_program):
    res = run_program("""
        parts = [torch.empty(2, device="cuda") for _ in range(world)]
        dist.all_gather(parts, torch.ones(rank + 1, device="cuda"))
    """)
    assert res.verdict == "mismatch" and "rank 0 sends 1 elements, rank 0 expects 2" in res.findings[0].message


def test_a_dtype_that_differs_between_ranks_is_a_mismatch(run_program):
    res = run_program("""
        dt = torch.float16 if rank else torch.float32
        parts = [torch.empty(2, device="cuda", dtype=dt) for _ in range(world)]
        dist.all_gather(parts, torch.ones(2, device="cuda", dtype=dt))
    """)
    assert res.verdict == "mismatch"
