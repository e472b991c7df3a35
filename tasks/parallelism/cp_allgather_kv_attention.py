"""Context-parallel causal attention with all-gathered K/V, as Llama 3 was trained: every rank all-gathers
the (grouped-query, hence small) K and V of the whole sequence, then computes attention for its own
load-balanced query chunks.

The global sequence (length S) is cut into 2*ws chunks of length c; rank r holds chunks r and 2*ws-1-r,
concatenated: q (B, 2c, H, Dh), k and v (B, 2c, Hkv, Dh) with H = G * Hkv (query head h uses K/V head
h // G). The layer:

    all-gather K and V from every rank and put the chunks back in sequence order -> (B, S, Hkv, Dh)
    for each local query chunk (global chunk j): causal attention over keys [0, (j+1)*c), i.e. every key
    at a global position <= the query's, scale 1/sqrt(Dh)

Returns out (B, 2c, H, Dh) for the local queries.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "cp_allgather_kv_attention"
ID = 65
TITLE = "Context-parallel GQA attention: K/V all-gather, causal attention of load-balanced local query chunks"
CATEGORY = "parallelism"
ORIGIN = "Llama 3 context parallelism (all-gather based CP, Dubey et al. 2024); torchtitan CP all-gather rotation"
WORLD_SIZES = WorldSizes(min=2, max=16, power_of_two=True)  # 2*ws must divide the sequence
SIZES = {
    "screen": {"batch": 1, "seq": 64, "heads": 4, "kv_heads": 2, "head_dim": 16},
    "full": {"batch": 1, "seq": 16384, "heads": 32, "kv_heads": 8, "head_dim": 128},
}
OUTPUTS = [Output("out", torch.float32,
                  shape=lambda s, n, r: (s["batch"], s["seq"] // n, s["heads"], s["head_dim"]))]


def make_inputs(ctx):
    s = ctx.size
    sl = s["seq"] // ctx.world_size
    q = ctx.randn(s["batch"], sl, s["heads"], s["head_dim"], scale=2.0)   # chunks r and 2*ws-1-r; peaked softmax
    k = ctx.randn(s["batch"], sl, s["kv_heads"], s["head_dim"])
    v = ctx.randn(s["batch"], sl, s["kv_heads"], s["head_dim"])
    return q, k, v


def reference(q, k, v):
    world, rank = dist.get_world_size(), dist.get_rank()
    b, sl, h, dh = q.shape
    hkv = k.shape[2]
    c = sl // 2
    gathered = torch.empty(world, 2, b, sl, hkv, dh, device=q.device)
    dist.all_gather_into_tensor(gathered, torch.stack([k, v]))
    # back to sequence order: first chunks of ranks 0..ws-1, then second chunks of ranks ws-1..0
    g = gathered.view(world, 2, b, 2, c, hkv, dh)
    first = g[:, :, :, 0].permute(1, 2, 0, 3, 4, 5).reshape(2, b, world * c, hkv, dh)
    second = g.flip(0)[:, :, :, 1].permute(1, 2, 0, 3, 4, 5).reshape(2, b, world * c, hkv, dh)
    kv = torch.cat([first, second], dim=2).transpose(2, 3).repeat_interleave(h // hkv, dim=2)  # (2, B, H, S, Dh)
    qt = q.transpose(1, 2)
    outs = []
    for part, j in ((0, rank), (1, 2 * world - 1 - rank)):
        end = (j + 1) * c
        qpos = torch.arange(j * c, end, device=q.device)
        mask = torch.arange(end, device=q.device).unsqueeze(0) <= qpos.unsqueeze(1)   # (c, end)
        outs.append(F.scaled_dot_product_attention(qt[:, :, part * c:(part + 1) * c], kv[0, :, :, :end],
                                                   kv[1, :, :, :end], attn_mask=mask))
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous()


def speed_of_light(size, world_size):
    b, s, h, hkv, dh = size["batch"], size["seq"], size["heads"], size["kv_heads"], size["head_dim"]
    sl = s // world_size
    return {"link_bytes_per_rank": (world_size - 1) * 2 * b * sl * hkv * dh * 4,
            "flops": 4 * b * h * dh * s * s / 2 / world_size}
