"""DeepSpeed-Ulysses attention backward: the output gradient is re-sharded from sequence to heads with an
all-to-all, causal attention backward runs per local head over the whole sequence, and the q/k/v
gradients are re-sharded from heads back to sequence with a second all-to-all (the autograd backward of
DeepSpeed-Ulysses' DistributedAttention, whose _SeqAllToAll is its own transpose).

Layout (flash-attention's (B, S, H, Dh)): after the forward, rank r keeps what its local attention saved,
q, k, v for heads [r*H/ws, (r+1)*H/ws) over the whole sequence, (B, S, H/ws, Dh); the gradient arriving
from the output projection is sequence-sharded like the layer's output, dout (B, S/ws, H, Dh), positions
[r*S/ws, (r+1)*S/ws). The backward:

    all-to-all   dout: sequence-sharded -> head-sharded          (B, S, H/ws, Dh)
    attention    dq, dk, dv = backward of o = causal softmax(q k^T / sqrt(Dh)) v, per local head
    all-to-all   dq, dk, dv: head-sharded -> sequence-sharded     (B, S/ws, H, Dh) each

Inputs per rank: q, k, v (B, S, H/ws, Dh) fp32, dout (B, S/ws, H, Dh) fp32. Outputs: dq, dk, dv
(B, S/ws, H, Dh) fp32. Tolerance: fp32 with rtol 1e-3, atol 1e-4: the backward of a softmax sums S
products in an order that differs between kernels (math vs flash), which costs more than fp32's
default on gradients of this size; a bf16 result still fails.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "ulysses_attention_backward"
ID = 77
TITLE = ("DeepSpeed-Ulysses attention backward: seq->head all-to-all of dout, local attention backward, "
         "head->seq all-to-all")
CATEGORY = "parallelism"
ORIGIN = "DeepSpeed-Ulysses DistributedAttention backward (_SeqAllToAll autograd, local flash-attention backward)"
WORLD_SIZES = WorldSizes(min=2, max=8, power_of_two=True)  # ws divides the heads (8 at screen size)
SIZES = {"screen": {"batch": 1, "seq": 64, "heads": 8, "head_dim": 8},
         "full": {"batch": 1, "seq": 32768, "heads": 32, "head_dim": 128}}
_seq_shard = lambda s, n, r: (s["batch"], s["seq"] // n, s["heads"], s["head_dim"])  # noqa: E731
OUTPUTS = [Output(name, torch.float32, rtol=1e-3, atol=1e-4, shape=_seq_shard) for name in ("dq", "dk", "dv")]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    local_heads = (s["batch"], s["seq"], s["heads"] // n, s["head_dim"])
    q, k, v = ctx.randn(*local_heads), ctx.randn(*local_heads), ctx.randn(*local_heads)
    dout = ctx.randn(s["batch"], s["seq"] // n, s["heads"], s["head_dim"])
    return q, k, v, dout


def _seq_to_heads(x, world):
    """(B, S/ws, H, Dh) sequence-sharded -> (B, S, H/ws, Dh) head-sharded."""
    b, sl, h, dh = x.shape
    send = x.view(b, sl, world, h // world, dh).permute(2, 0, 1, 3, 4).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)                       # recv[src]: src's positions, my heads
    return recv.permute(1, 0, 2, 3, 4).reshape(b, world * sl, h // world, dh)


def _heads_to_seq(x, world):
    """(..., B, S, H/ws, Dh) head-sharded -> (..., B, S/ws, H, Dh) sequence-sharded."""
    *lead, s, hl, dh = x.shape
    send = x.reshape(-1, world, s // world, hl, dh).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)                       # recv[src]: my positions, src's heads
    return recv.permute(1, 2, 0, 3, 4).reshape(*lead, s // world, world * hl, dh)


def reference(q, k, v, dout):
    world = dist.get_world_size()
    d_heads = _seq_to_heads(dout, world)
    with torch.enable_grad():
        qkv = [t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v)]   # (B, H/ws, S, Dh)
        out = F.scaled_dot_product_attention(*qkv, is_causal=True)
        grads = torch.autograd.grad(out, qkv, d_heads.transpose(1, 2))
    dq, dk, dv = _heads_to_seq(torch.stack([g.transpose(1, 2) for g in grads]), world).unbind(0)
    return dq, dk, dv


def speed_of_light(size, world_size):
    b, s, h, dh = size["batch"], size["seq"], size["heads"], size["head_dim"]
    sl = s // world_size
    moved = (world_size - 1) / world_size * 4 * b * sl * h * dh * 4         # dout in, dq/dk/dv out
    return {"link_bytes_per_rank": moved, "flops": 2.5 * 4 * b * s * s * dh * (h // world_size) / 2}
