"""expect: functional wrong_output|race - a one-shot all-reduce over symmetric memory with no barrier at exit: called
back to back (as a GPU timing loop calls it), a rank that finishes first copies its next input into its
buffer while a slower peer still reads the previous one. The fixed twin is
tests/fixed_candidates/all_reduce__exit_barrier.py."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_BUFFERS: dict = {}


def _buffer(x: torch.Tensor):
    """This rank's symmetric buffer shaped like x, and its handle (allocated and rendezvoused once)."""
    key = (tuple(x.shape), x.dtype)
    if key not in _BUFFERS:
        buf = symm_mem.empty(*x.shape, dtype=x.dtype, device=x.device)
        _BUFFERS[key] = (buf, symm_mem.rendezvous(buf, dist.group.WORLD.group_name))
    return _BUFFERS[key]


def solution(x):
    buf, handle = _buffer(x)
    buf.copy_(x)
    handle.barrier(channel=0)
    out = torch.zeros_like(x)
    for peer in range(handle.world_size):
        out += handle.get_buffer(peer, list(x.shape), x.dtype)
    return out
