"""Rotary embedding + K/V all-gather for all-gather-based context parallelism (Llama 3 CP; Megatron-LM
cp_comm_type="all_gather"; torchtitan context parallel).

Llama 3's context parallelism splits the sequence into 2*ws chunks and gives rank r chunks r and
2*ws-1-r (load balancing under the causal mask). Each rank computes q, k, v for its tokens, applies the
rotary embedding with the tokens' global positions, and all-gathers the rotated keys and the values so
that its queries can attend to the whole sequence:

    q_rot = rope(q), k_rot = rope(k)              # x * cos + rotate_half(x) * sin, in fp32
    k_full, v_full = all_gather(k_rot), all_gather(v), reordered to natural sequence order

rope is the GPT-NeoX / Llama (Hugging Face) form: rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]);
cos/sin (2*chunk, D) fp32 are given for this rank's positions (chunk r, then chunk 2*ws-1-r), built
from theta = 500000 as Llama 3 does.

Inputs per rank: q (2*chunk, q_heads, D), k, v (2*chunk, kv_heads, D) bf16 (the rank's two chunks in
that order); cos, sin (2*chunk, D) fp32. chunk = seq / (2*ws).
Outputs: q_rot (2*chunk, q_heads, D) bf16; k_full, v_full (seq, kv_heads, D) bf16, positions 0..seq-1.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "rope_cp_allgather_kv"
ID = 32
TITLE = "RoPE + K/V all-gather for load-balanced context parallelism"
CATEGORY = "fused"
ORIGIN = "Llama 3 all-gather context parallelism; Megatron-LM/TE cp_comm_type='all_gather'; torchtitan CP"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
# full: a 128k-token sequence, 32 query / 8 KV heads of dim 128 per rank
SIZES = {"screen": {"seq": 64, "q_heads": 4, "kv_heads": 2, "head_dim": 16},
         "full": {"seq": 131072, "q_heads": 32, "kv_heads": 8, "head_dim": 128}}
OUTPUTS = [Output("q_rot", torch.bfloat16, shape=lambda s, ws, r: (s["seq"] // ws, s["q_heads"], s["head_dim"])),
           Output("k_full", torch.bfloat16, shape=lambda s, ws, r: (s["seq"], s["kv_heads"], s["head_dim"])),
           Output("v_full", torch.bfloat16, shape=lambda s, ws, r: (s["seq"], s["kv_heads"], s["head_dim"]))]


def make_inputs(ctx):
    s, ws, r = ctx.size, ctx.world_size, ctx.rank
    n, d = s["seq"] // ws, s["head_dim"]
    chunk = n // 2
    q = ctx.randn(n, s["q_heads"], d, dtype=torch.bfloat16)
    k = ctx.randn(n, s["kv_heads"], d, dtype=torch.bfloat16)
    v = ctx.randn(n, s["kv_heads"], d, dtype=torch.bfloat16)
    pos = torch.cat([torch.arange(r * chunk, (r + 1) * chunk),
                     torch.arange((2 * ws - 1 - r) * chunk, (2 * ws - r) * chunk)]).to(q.device)
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, d, 2, dtype=torch.float64, device=q.device) / d))
    ang = pos[:, None].double() * inv_freq[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return q, k, v, ang.cos().float(), ang.sin().float()


def reference(q, k, v, cos, sin):
    ws = dist.get_world_size()
    half = q.shape[-1] // 2

    def rope(x):
        xf = x.float()
        rot = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
        return (xf * cos[:, None, :] + rot * sin[:, None, :]).to(x.dtype)

    q_rot, k_rot = rope(q), rope(k)
    n, chunk = k.shape[0], k.shape[0] // 2
    outs = []
    for t in (k_rot, v):
        g = torch.empty(ws, 2, chunk, *t.shape[1:], dtype=t.dtype, device=t.device)
        dist.all_gather_into_tensor(g, t.contiguous())
        # rank r holds chunks r and 2*ws-1-r: chunk order = [0..ws-1 from slot 0] + [ws-1..0 from slot 1]
        outs.append(torch.cat([g[:, 0], g[:, 1].flip(0)]).reshape(ws * n, *t.shape[1:]))
    return q_rot, outs[0], outs[1]


def speed_of_light(size, world_size):
    s, hq, hk, d = size["seq"], size["q_heads"], size["kv_heads"], size["head_dim"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * 2 * s * hk * d * 2,
            "flops": 3 * s / world_size * (hq + hk) * d}  # per rank
