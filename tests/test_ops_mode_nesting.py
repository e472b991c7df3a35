"""The rank's ops mode (race checks of host ops on symmetric buffers, stream order) survives being pushed
while another dispatch mode is active.

It is pushed lazily, at a rank's first host wait or symmetric allocation. When that happens inside another
mode's `with` (the screen's input budget around a ParallelKernelBench builder that moves an `nn.Linear` to
the GPU, which is a host wait; PoisonEmpty around a call), that mode's exit pops the top of the dispatch
stack: the ops mode, not itself. Everything after ran unchecked, with the other mode left active: the
ParallelKernelBench MoE candidate 51 (Triton tree) wrote a symmetric buffer with no barrier before its
peers' side-stream reads and passed. Each case has a twin with the barrier, which must stay clean.
"""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils._python_dispatch import TorchDispatchMode

from pkbsim.taskrun import Call, run_calls
from tasks.registry import get

_BUF: dict = {}
_LEFT: dict = {}


class Passthrough(TorchDispatchMode):
    """Stands in for a harness mode entered around part of a rank's work."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _write_then_peer_read(x, barrier: bool):
    rank, world = dist.get_rank(), dist.get_world_size()
    with Passthrough():
        x.sum().cpu()  # a host read (a wait): the rank's ops mode is pushed here, inside Passthrough
    if rank not in _BUF:
        buf = symm_mem.empty(16, device=x.device, dtype=torch.float32)
        _BUF[rank] = (buf, symm_mem.rendezvous(buf, dist.group.WORLD))
    buf, hdl = _BUF[rank]
    buf[:4].copy_(x[:4])
    if barrier:
        hdl.barrier(channel=0)
    got = hdl.get_buffer((rank + 1) % world, [4], torch.float32).clone()
    hdl.barrier(channel=1)
    _LEFT[rank] = [type(m).__name__ for m in _mode_stack()]
    out = x.clone()
    dist.all_reduce(out)
    return out + 0 * got.sum()


def _mode_stack():
    return [torch._C._get_dispatch_stack_at(i) for i in range(torch._C._len_torch_dispatch_stack())]


def _unsynchronised(x):
    return _write_then_peer_read(x, barrier=False)


def _synchronised(x):
    return _write_then_peer_read(x, barrier=True)


def _run(fn):
    _BUF.clear()
    _LEFT.clear()
    return run_calls(get("all_reduce"), [Call(0, fn=fn)], 2).result


def test_a_race_after_the_ops_mode_was_pushed_inside_another_mode_is_found():
    res = _run(_unsynchronised)
    assert res.verdict == "protocol" and [f.kind for f in res.findings] == ["race"], res.findings
    assert "Passthrough" not in _LEFT.get(0, []), _LEFT


def test_the_barrier_twin_is_clean_and_leaves_no_mode_behind():
    res = _run(_synchronised)
    assert res.verdict == "ok", res.findings
    assert _LEFT[0] == _LEFT[1] and "Passthrough" not in _LEFT[0], _LEFT
