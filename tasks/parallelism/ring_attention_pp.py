"""A two-stage pipeline of causal ring-attention blocks: pipeline parallelism across stages, context
parallelism (ring attention, zigzag load-balanced sharding) inside each stage, micro-batched, as
Megatron-LM composes pipeline and context parallelism.

Mesh: pp = 2 stages (outer), cp = ws / 2 (inner); rank = stage * cp + cp_rank. The groups (the cp ring
of each stage, and the pp pair of each cp rank) are built in make_inputs. Each stage is one residual
causal self-attention block, h <- h + attn(h) @ w_o^T with qkv = h @ w_qkv^T (w_qkv (3D, D) with rows
(q, k, v) x (head) x (head dim), w_o (D, D), D = H * Dh, scale 1/sqrt(Dh)); every rank of a stage holds
that stage's weights. The global sequence (length S) is cut into 2*cp chunks of length c; cp rank i
holds chunks i and 2*cp-1-i, concatenated. x (M, B, 2c, D) holds M micro-batches of the first stage's
input; ranks of the second stage get None (they receive activations); act_shape = (M, B, 2c, D).

    stage 0  for each micro-batch: the block, with ring attention over its cp group; the result is
             sent asynchronously over the pp group to the stage-1 rank with the same cp rank while the
             next micro-batch is computed
    stage 1  for each micro-batch: receive it (the next receive is posted before computing), the
             block with ring attention over its cp group

Ring attention: the K/V block goes around the cp ring, each step attends to the blocks causality
needs (zigzag: from a lower cp rank only its first chunk, from a higher one only the local second
chunk attends), results merged by log-sum-exp weighting.

Returns the stage's output for every micro-batch, (M, B, 2c, D): stage 0 what it sent, stage 1 the
pipeline's output.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes, warm_up
from tasks.parallelism._ring import ring_attention

SLUG = "ring_attention_pp"
ID = 61
TITLE = "Pipeline of ring-attention stages: micro-batched stage-to-stage send/recv, causal K/V ring per stage"
CATEGORY = "parallelism"
ORIGIN = "Megatron-LM pipeline parallelism x context parallelism (ring attention with zigzag sharding)"
WORLD_SIZES = WorldSizes(min=4, max=16, power_of_two=True)
PP = 2
SIZES = {
    "screen": {"micro_batches": 2, "batch": 1, "seq": 64, "heads": 2, "head_dim": 16},
    "full": {"micro_batches": 4, "batch": 1, "seq": 8192, "heads": 16, "head_dim": 128},
}
OUTPUTS = [Output("out", torch.float32, shape=lambda s, n, r: (s["micro_batches"], s["batch"],
                                                                s["seq"] // (n // PP), s["heads"] * s["head_dim"]))]


def make_inputs(ctx):
    s = ctx.size
    n, h, dh, mb = ctx.world_size, s["heads"], s["head_dim"], s["micro_batches"]
    cp, d = n // PP, h * dh
    cp_groups = [dist.new_group(list(range(i * cp, (i + 1) * cp))) for i in range(PP)]
    pp_groups = [dist.new_group(list(range(j, n, cp))) for j in range(cp)]
    stage, ci = divmod(ctx.rank, cp)
    c = s["seq"] // (2 * cp)
    x = ctx.randn(mb, s["batch"], s["seq"], d, shared=True)
    x = torch.cat([x[:, :, ci * c:(ci + 1) * c], x[:, :, (2 * cp - 1 - ci) * c:(2 * cp - ci) * c]], 2)  # zigzag
    w_qkv = ctx.randn(PP, 3 * d, d, scale=d ** -0.5, shared=True)[stage]     # this stage's weights
    w_o = ctx.randn(PP, d, d, scale=d ** -0.5, shared=True)[stage]
    act_shape = (mb, s["batch"], 2 * c, d)          # (micro-batches, B, 2c, D): what travels between stages
    warm_up([cp_groups[stage], pp_groups[ci]], ctx.device)
    return (x if stage == 0 else None), w_qkv, w_o, h, act_shape, cp_groups[stage], pp_groups[ci]


def _block(h, w_qkv, w_o, heads, cp_group):
    b, sl, d = h.shape
    qkv = (h @ w_qkv.t()).view(b, sl, 3, heads, d // heads).permute(2, 0, 3, 1, 4).contiguous()
    o = ring_attention(qkv[0], qkv[1], qkv[2], cp_group)
    return h + o.transpose(1, 2).reshape(b, sl, d) @ w_o.t()


def reference(x, w_qkv, w_o, heads, act_shape, cp_group, pp_group):
    stage = dist.get_rank(pp_group)
    peer = dist.get_process_group_ranks(pp_group)[1 - stage]
    micro_batches = act_shape[0]
    outs = []
    if stage == 0:
        sends = []
        for m in range(micro_batches):
            outs.append(_block(x[m], w_qkv, w_o, heads, cp_group))
            sends += dist.batch_isend_irecv([dist.P2POp(dist.isend, outs[-1], peer, pp_group)])
        for req in sends:
            req.wait()
    else:
        def post():
            buf = torch.empty(act_shape[1:], device=w_o.device)
            return buf, dist.batch_isend_irecv([dist.P2POp(dist.irecv, buf, peer, pp_group)])
        nxt = post()
        for m in range(micro_batches):
            buf, reqs = nxt
            for req in reqs:
                req.wait()
            if m + 1 < micro_batches:
                nxt = post()
            outs.append(_block(buf, w_qkv, w_o, heads, cp_group))
    return torch.stack(outs)


def speed_of_light(size, world_size):
    m, b, s, h, dh = size["micro_batches"], size["batch"], size["seq"], size["heads"], size["head_dim"]
    cp, d = world_size // PP, h * dh
    sl = s // cp
    ring = (cp - 1) * 2 * b * sl * d * 4
    flops = 2 * b * sl * d * 4 * d + 4 * b * h * dh * s * s / 2 / cp
    return {"link_bytes_per_rank": m * (ring + b * sl * d * 4), "flops": m * flops}
