"""All-reduce + residual add + RMSNorm as reduce-scatter -> norm of this rank's tokens -> all-gather.

An all-reduce is a reduce-scatter followed by an all-gather; the residual add and the RMSNorm are per token,
so they can run between the two halves on the rank's own 1/ws of the tokens, and the all-gather then carries
the two finished outputs. Each rank writes its blocks of the partial sums straight into the peers' symmetric
staging buffers, sums its own block locally (rounded to bf16 once, as an all-reduce result is), adds the
residual and normalises (`F.rms_norm`) only tokens/ws rows, and writes y and residual_out into a symmetric
buffer from which every rank pulls both outputs in one barrier pair. If the tokens do not split evenly it
falls back to a symmetric-memory all-reduce and the full epilogue. Full size (8192 x 8192 bf16, 8 ranks): the
reference is an NCCL all-reduce of 128 MiB (~0.65 ms at ~360 GB/s bus bandwidth) and an epilogue of ~9 fp32
passes over 64M elements, ~2.0 ms on an H100's 3.35 TB/s (scaled from one H200's time by the bandwidths:
docs/timing_model_log.md#from-the-docstrings): ~2.65 ms. Here the epilogue covers 1/8 of the tokens (~0.25 ms)
while the links carry 7/8 * 128 MiB in the reduce-scatter and 2 * 7/8 * 128 MiB in the gather of two outputs
(~1.0 ms at ~380-420 GB/s): ~1.25-1.3 ms, expect ~1.9-2.1x on H100. At decode sizes (a few tokens) the
fallback's one-shot kernel (~7 us against NCCL's ~20 us) makes it ~2x.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.solutions._direct import pull_all_gather, push_reduce_scatter
from tasks.solutions._symm import all_reduce_symmetric, symmetric_buffer


def _epilogue(s, residual, gamma, eps, out_y=None, out_r=None):
    r = s.float().add_(residual)
    y = F.rms_norm(r, (r.shape[-1],), eps=eps).to(s.dtype)
    return torch.mul(y, gamma, out=out_y), (r.to(s.dtype) if out_r is None else out_r.copy_(r))


def _concat_outputs(views):
    return torch.cat([v[0] for v in views]), torch.cat([v[1] for v in views])


def solution(partial, residual, gamma, eps):
    rank, ws = dist.get_rank(), dist.get_world_size()
    tokens, hidden = partial.shape
    if tokens % ws:
        buf, _ = symmetric_buffer(partial.shape, partial.dtype, partial.device, tag="allreduce_residual_rmsnorm")
        buf.copy_(partial)
        return _epilogue(all_reduce_symmetric(buf), residual, gamma, eps)
    blocks = partial.view(ws, tokens // ws, hidden)
    staging, rs_hdl = symmetric_buffer(blocks.shape, partial.dtype, partial.device, tag="residual_rmsnorm.rs")
    outputs, ag_hdl = symmetric_buffer((2, *blocks.shape[1:]), partial.dtype, partial.device,
                                       tag="residual_rmsnorm.ag")
    s = push_reduce_scatter(blocks, staging, rs_hdl)
    _epilogue(s, residual.view(blocks.shape)[rank], gamma, eps, out_y=outputs[0], out_r=outputs[1])
    return pull_all_gather(outputs, ag_hdl, outputs, combine=_concat_outputs)
