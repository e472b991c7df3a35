"""expect: functional error - a Triton one-shot all-reduce that keeps only the integer peer addresses of its
symmetric buffer (buffer_ptrs, signal_pad_ptrs) in a module-level cache and lets the tensor and the handle
go at the end of the first call: torch frees the buffer, and the next call's store through a cached address
is an illegal memory access on the GPU. The fixed twin (tests/fixed_candidates/all_reduce__symm_keeps_handle.py)
keeps the handle in the cache."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

_POINTERS: dict = {}   # (shape, dtype) -> (peer buffer addresses, peer signal-pad addresses): ints only
BLOCK = 1024


@triton.jit
def _barrier(pads, rank, channel, WORLD: tl.constexpr):
    for peer in tl.static_range(WORLD):
        pad = tl.load(pads + peer).to(tl.pointer_type(tl.int32))
        while tl.atomic_cas(pad + channel * WORLD + rank, 0, 1, sem="release", scope="sys") != 0:
            pass
    mine = tl.load(pads + rank).to(tl.pointer_type(tl.int32))
    for peer in tl.static_range(WORLD):
        while tl.atomic_cas(mine + channel * WORLD + peer, 1, 0, sem="acquire", scope="sys") != 1:
            pass


@triton.jit
def _one_shot(bufs, pads, x, out, rank, n, BLOCK: tl.constexpr, WORLD: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    own = tl.load(bufs + rank).to(tl.pointer_type(x.dtype.element_ty))
    tl.store(own + offs, tl.load(x + offs, mask=mask), mask=mask)
    _barrier(pads, rank, pid, WORLD)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for peer in tl.static_range(WORLD):
        src = tl.load(bufs + peer).to(tl.pointer_type(x.dtype.element_ty))
        acc += tl.load(src + offs, mask=mask).to(tl.float32)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)
    _barrier(pads, rank, pid, WORLD)


def _pointers(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _POINTERS:
        buf = symm_mem.empty(*x.shape, dtype=x.dtype, device=x.device)
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
        _POINTERS[key] = (list(hdl.buffer_ptrs), list(hdl.signal_pad_ptrs))   # the bug: buf and hdl are not kept
    return _POINTERS[key]


def solution(x):
    bufs, pads = _pointers(x)
    rank, world = dist.get_rank(), dist.get_world_size()
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    _one_shot[(triton.cdiv(n, BLOCK),)](torch.tensor(bufs, dtype=torch.int64, device=x.device),
                                        torch.tensor(pads, dtype=torch.int64, device=x.device),
                                        x, out, rank, n, BLOCK=BLOCK, WORLD=world)
    return out
