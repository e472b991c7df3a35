"""Backward of context-parallel causal attention with all-gathered K/V (Llama 3's all-gather based
context parallelism, Dubey et al. 2024): K and V are gathered again, each rank computes the gradients of
its own query chunks, and the gradients of the gathered K and V are reduce-scattered back to the ranks
that own those positions.

Layout as in the forward (cp_allgather_kv_attention): the global sequence (length S) is cut into 2*ws
chunks of length c; rank r holds chunks r and 2*ws-1-r, concatenated: q and dout (B, 2c, H, Dh), k and v
(B, 2c, Hkv, Dh) with H = G * Hkv (query head h uses K/V head h // G). Every query attends causally, by
global position, with scale 1/sqrt(Dh). The backward:

    all-gather k, v from every rank (rank order: the keys of rank s at the global positions of its
    two chunks)
    dq, dK, dV = backward of o = causal softmax(q K^T / sqrt(Dh)) V for the local queries, given dout;
    dK, dV cover every rank's keys and are partial sums (only this rank's queries contributed)
    reduce-scatter dK, dV: rank r receives the sum over all ranks of the gradients of its own keys

Inputs per rank: q, k, v, dout (fp32). Outputs: dq (B, 2c, H, Dh), dk, dv (B, 2c, Hkv, Dh) fp32.
Tolerance: fp32 with rtol 1e-3, atol 1e-4: the backward of a softmax sums S products (and dK, dV sum over
ranks and grouped heads) in an order that differs between kernels; a bf16 result still fails.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "cp_allgather_kv_attention_backward"
ID = 84
TITLE = "Context-parallel GQA attention backward: K/V all-gather, local-query backward, dK/dV reduce-scatter"
CATEGORY = "parallelism"
ORIGIN = "Llama 3 context parallelism backward (all-gather K/V, reduce-scatter dK/dV; Dubey et al. 2024)"
WORLD_SIZES = WorldSizes(min=2, max=16, power_of_two=True)  # 2*ws must divide the sequence
SIZES = {"screen": {"batch": 1, "seq": 64, "heads": 4, "kv_heads": 2, "head_dim": 8},
         "full": {"batch": 1, "seq": 16384, "heads": 32, "kv_heads": 8, "head_dim": 128}}
_q_shape = lambda s, n, r: (s["batch"], s["seq"] // n, s["heads"], s["head_dim"])  # noqa: E731
_kv_shape = lambda s, n, r: (s["batch"], s["seq"] // n, s["kv_heads"], s["head_dim"])  # noqa: E731
OUTPUTS = [Output("dq", torch.float32, rtol=1e-3, atol=1e-4, shape=_q_shape),
           Output("dk", torch.float32, rtol=1e-3, atol=1e-4, shape=_kv_shape),
           Output("dv", torch.float32, rtol=1e-3, atol=1e-4, shape=_kv_shape)]


def make_inputs(ctx):
    s = ctx.size
    sl = s["seq"] // ctx.world_size
    q = ctx.randn(s["batch"], sl, s["heads"], s["head_dim"])
    k = ctx.randn(s["batch"], sl, s["kv_heads"], s["head_dim"])
    v = ctx.randn(s["batch"], sl, s["kv_heads"], s["head_dim"])
    dout = ctx.randn(s["batch"], sl, s["heads"], s["head_dim"])
    return q, k, v, dout


def _positions(rank, world, c, device):
    """Global positions of the two chunks rank `rank` holds."""
    j = 2 * world - 1 - rank
    return torch.cat([torch.arange(rank * c, (rank + 1) * c, device=device),
                      torch.arange(j * c, (j + 1) * c, device=device)])


def reference(q, k, v, dout):
    world, rank = dist.get_world_size(), dist.get_rank()
    b, sl, _, dh = q.shape
    kv = torch.stack([k, v])                                              # (2, B, 2c, Hkv, Dh)
    gathered = kv.new_empty(world, *kv.shape)
    dist.all_gather_into_tensor(gathered, kv)
    k_pos = torch.cat([_positions(r, world, sl // 2, q.device) for r in range(world)])
    mask = _positions(rank, world, sl // 2, q.device)[:, None] >= k_pos[None, :]
    with torch.enable_grad():
        g = gathered.detach().requires_grad_()
        keys, values = (g[:, i].permute(1, 3, 0, 2, 4).reshape(b, -1, world * sl, dh) for i in (0, 1))
        qt = q.detach().transpose(1, 2).requires_grad_()
        out = F.scaled_dot_product_attention(qt, keys, values, attn_mask=mask, enable_gqa=True)
        dq, dg = torch.autograd.grad(out, (qt, g), dout.transpose(1, 2))
    dkv = torch.empty_like(kv)
    dist.reduce_scatter_tensor(dkv, dg.contiguous())
    return dq.transpose(1, 2).contiguous(), dkv[0], dkv[1]


def speed_of_light(size, world_size):
    b, s, h, hkv, dh = size["batch"], size["seq"], size["heads"], size["kv_heads"], size["head_dim"]
    sl = s // world_size
    kv = 2 * b * sl * hkv * dh * 4
    return {"link_bytes_per_rank": 2 * (world_size - 1) * kv, "flops": 2.5 * 4 * b * h * dh * s * s / 2 / world_size}
