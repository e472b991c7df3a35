"""A host wait orders a side stream after the default stream's earlier work, also for a stream created later.

On a GPU, `dist.barrier()` (NCCL) blocks the host on the current stream, and `torch.cuda.synchronize()` on
every stream: work enqueued afterwards, on any stream, including one created afterwards, runs after it.
A ParallelKernelBench gather candidate wrote its input on the default stream (the harness), called
`dist.barrier()`, then created a copy stream that read the input without `wait_stream`: pkb reported a race,
because the stream tracking started with the side stream and took every earlier write as unsynchronised.
Each case has a twin that writes the buffer after the host wait, which is still a race.
"""


def kinds(res):
    return [f.kind for f in res.findings]


def test_barrier_before_the_side_stream_exists_orders_earlier_writes(run_program):
    ok = run_program("""
        x = torch.ones(4, device="cuda") * 3
        dist.barrier()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y = x * 2
    """)
    assert ok.verdict == "ok", ok.output
    bug = run_program("""
        dist.barrier()
        x = torch.ones(4, device="cuda") * 3
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y = x * 2
    """)
    assert bug.verdict == "protocol" and kinds(bug) == ["race"], bug.output


def test_barrier_after_the_side_stream_exists_orders_earlier_writes(run_program):
    ok = run_program("""
        s = torch.cuda.Stream()
        x = torch.ones(4, device="cuda") * 3
        dist.barrier()
        with torch.cuda.stream(s):
            y = x * 2
    """)
    assert ok.verdict == "ok", ok.output
    bug = run_program("""
        s = torch.cuda.Stream()
        dist.barrier()
        x = torch.ones(4, device="cuda") * 3
        with torch.cuda.stream(s):
            y = x * 2
    """)
    assert bug.verdict == "protocol" and kinds(bug) == ["race"], bug.output


def test_device_synchronize_orders_writes_for_streams_created_later(run_program):
    ok = run_program("""
        x = torch.ones(4, device="cuda") * 3
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y = x * 2
        s1 = torch.cuda.Stream()
        with torch.cuda.stream(s1):
            z = torch.ones(4, device="cuda")
        torch.cuda.synchronize()
        s2 = torch.cuda.Stream()
        with torch.cuda.stream(s2):
            w = z + x
        dist.all_reduce(x)
    """)
    assert ok.verdict == "ok", ok.output
    bug = run_program("""
        s1 = torch.cuda.Stream()
        torch.cuda.synchronize()
        with torch.cuda.stream(s1):
            z = torch.ones(4, device="cuda")
        s2 = torch.cuda.Stream()
        with torch.cuda.stream(s2):
            w = z + 1
        dist.all_reduce(w)
    """)
    assert bug.verdict == "protocol" and kinds(bug) == ["race"], bug.output


_SIDE: dict = {}


def _side_stream_reads_unwaited_on_second_call(x):
    """Call 1 creates a side stream (the rank's ops mode is pushed inside the call); call 2 reads, on it, a
    buffer the default stream wrote, without waiting: a race."""
    import torch
    import torch.distributed as dist
    s = _SIDE.get(dist.get_rank())
    if s is None:
        _SIDE[dist.get_rank()] = torch.cuda.Stream()
    else:
        y = x * 2
        with torch.cuda.stream(s):
            z = y + 1  # noqa: F841 - work on a side stream, never read
    out = x.clone()
    dist.all_reduce(out)
    return out


def test_stream_tracking_survives_the_end_of_a_poisoned_call():
    """The screen runs a candidate call under PoisonEmpty (a dispatch mode); the rank's ops mode, pushed
    during the call, was popped by PoisonEmpty's exit, so back-to-back calls ran unchecked."""
    from pkbsim.taskrun import Call, run_calls
    from tasks.registry import get
    _SIDE.clear()
    fn = _side_stream_reads_unwaited_on_second_call
    run = run_calls(get("all_reduce"), [Call(0, fn=fn, poison=True), Call(1, fn=fn, poison=True, sync=False)], 2)
    assert run.result.verdict == "protocol" and kinds(run.result) == ["race"], run.result.findings
