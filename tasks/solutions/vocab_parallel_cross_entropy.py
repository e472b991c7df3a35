"""Vocab-parallel cross entropy with one symmetric-memory exchange and a fused local softmax.

The reference needs a MAX all-reduce (the global maximum) before its SUM all-reduce, two dependent round
trips. Working in log-sum-exp form needs only one: each rank computes the log-softmax of its slice in one
fused kernel (`F.log_softmax(..., dtype=float32)` reads the bf16 logits once), recovers its local log-sum-exp
lse_r from one column, and publishes (lse_r, target logit or 0) per token in a cached symmetric buffer. After
a barrier every rank reads all peers' pairs and combines them: lse = logsumexp_r(lse_r), loss = lse - sum_r
z_t. The gradient is exp(logsm + lse_r - lse) minus the one-hot, computed in place in fp32 and rounded to bf16
once, as the reference does. Full size (8192 tokens, 128256 vocab, 8 ranks: 8192 x 16032 logits per rank): the
reference makes ~12 passes over 131M elements (~7.6 GB of HBM traffic) and two dependent NCCL all-reduces of
32-64 KiB (~20 us each); this makes ~5 passes and one exchange (~8 us). The local work alone runs ~1.33x
faster (measured on one H200 without communication: docs/timing_model_log.md#from-the-docstrings):
expect ~1.35-1.4x at 8 ranks.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.solutions._symm import peer_view, symmetric_buffer


def solution(logits, target):
    rank, ws = dist.get_rank(), dist.get_world_size()
    tokens, v_local = logits.shape
    local_t = target - rank * v_local
    mine = (local_t >= 0) & (local_t < v_local)
    idx = local_t.clamp(0, v_local - 1)[:, None]

    logsm = F.log_softmax(logits, dim=-1, dtype=torch.float32)
    lse_local = logits[:, 0].float() - logsm[:, 0]
    z_t = torch.where(mine, logits.gather(1, idx).squeeze(1).float(), 0.0)

    pairs, hdl = symmetric_buffer((2, tokens), torch.float32, logits.device, tag="vocab_parallel_cross_entropy")
    torch.stack([lse_local, z_t], out=pairs)
    hdl.barrier(channel=0)
    gathered = torch.stack([peer_view(hdl, p, pairs) for p in range(ws)])  # (ws, 2, tokens)
    hdl.barrier(channel=0)
    lse = torch.logsumexp(gathered[:, 0], dim=0)
    loss = lse - gathered[:, 1].sum(0)

    grad = logsm.add_((lse_local - lse)[:, None]).exp_()
    grad.scatter_add_(1, idx, -mine[:, None].float())
    return loss, grad.to(torch.bfloat16)
