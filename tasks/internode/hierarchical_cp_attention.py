"""Hierarchical context-parallel causal attention across nodes: Ulysses all-to-all inside the node
(sequence <-> heads over NVLink), causal zigzag ring attention across nodes (K/V blocks cross the
network, one hop per step), then the inverse all-to-all: Transformer Engine's cp_comm_type "a2a+p2p",
the USP layout.

Layout (node-major): rank r is on node r // G at local rank r % G, G = size["gpus_per_node"] (8 at full
size, 4 at screen size); N = world_size / G nodes. The global sequence (length S) is cut into 2N chunks
of c = S / (2N) tokens; node n holds chunks n and 2N-1-n (zigzag, so causal work is balanced across
nodes), and its local rank l holds slice l of those 2c tokens in order: s = 2c/G tokens, all H heads.

Inputs per rank: q, k, v (B, s, H, Dh) fp32 (flash-attention layout). The reference:

    1. intra-node all-to-all of the stacked q, k, v: local rank l gets the node's 2c tokens for heads
       [l*H/G, (l+1)*H/G);
    2. zigzag causal ring attention over the ranks with local rank l (one per node): the K/V block
       travels around the N nodes while each rank merges block results by log-sum-exp;
    3. the inverse intra-node all-to-all: back to this rank's s tokens, all heads.

Output: out (B, s, H, Dh) fp32, causal softmax attention over global positions with scale 1/sqrt(Dh).
Process groups are built in make_inputs. Tolerance: the fp32 defaults, as for the single-node ring
attention tasks (a different block or merge order moves the result by fp32 round-off only).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.internode._nodes import gpus_per_node, node_groups
from tasks.parallelism._ring import ring_attention

SLUG = "hierarchical_cp_attention"
ID = 145
TITLE = "Cross-node context parallelism: Ulysses all-to-all in the node, causal ring attention across nodes"
CATEGORY = "internode"
ORIGIN = ("Transformer Engine / Megatron-Core hierarchical context parallelism (cp_comm_type 'a2a+p2p'); "
          "USP unified sequence parallelism (Fang & Zhao 2024)")
WORLD_SIZES = WorldSizes(min=16, multiple_of=8, power_of_two=True)  # 2N chunks must divide the sequence
# full: a 32k-token sequence, 32 heads of 128 (Llama-3-8B attention without GQA)
SIZES = {"screen": {"batch": 1, "seq": 128, "heads": 4, "head_dim": 8, "gpus_per_node": 4},
         "full": {"batch": 1, "seq": 32768, "heads": 32, "head_dim": 128, "gpus_per_node": 8}}
OUTPUTS = [Output("out", torch.float32,
                  shape=lambda s, ws, r: (s["batch"], s["seq"] // ws, s["heads"], s["head_dim"]))]


def make_inputs(ctx):
    s = ctx.size
    g = gpus_per_node(s, ctx.world_size)
    if s["heads"] % g or s["seq"] % (2 * ctx.world_size):
        raise ValueError(f"{s['heads']} heads or sequence {s['seq']} do not split over {g} GPUs per node and "
                         f"{ctx.world_size} ranks; use a power-of-two world size of at most {s['seq'] // 2}")
    intra, inter = node_groups(ctx)
    shape = (s["batch"], s["seq"] // ctx.world_size, s["heads"], s["head_dim"])
    # q at scale 2 gives scores of standard deviation 2, a realistically peaked softmax
    return ctx.randn(*shape, scale=2.0), ctx.randn(*shape), ctx.randn(*shape), intra, inter


def reference(q, k, v, intra_group, inter_group):
    g = dist.get_world_size(intra_group)
    b, s, h, d = q.shape
    # 1. sequence -> heads: send head group j of all three tensors to local rank j
    send = torch.stack([q, k, v]).view(3, b, s, g, h // g, d).permute(3, 0, 1, 4, 2, 5).contiguous()
    recv = torch.empty_like(send)                              # (source local rank, 3, B, H/G, s, D)
    dist.all_to_all_single(recv, send, group=intra_group)
    qh, kh, vh = recv.permute(1, 2, 3, 0, 4, 5).reshape(3, b, h // g, g * s, d)
    # 2. zigzag causal ring across nodes
    out = ring_attention(qh, kh, vh, inter_group)              # (B, H/G, 2c, D)
    # 3. heads -> sequence: send token slice j back to local rank j
    send = out.view(b, h // g, g, s, d).permute(2, 0, 3, 1, 4).contiguous()
    recv = torch.empty_like(send)                              # (source head group, B, s, H/G, D)
    dist.all_to_all_single(recv, send, group=intra_group)
    return recv.permute(1, 2, 0, 3, 4).reshape(b, s, h, d)


def speed_of_light(size, world_size):
    g = gpus_per_node(size, world_size)
    nodes = world_size // g
    b, sq, h, d = size["batch"], size["seq"], size["heads"], size["head_dim"]
    local = b * sq // world_size * h * d * 4                   # one of q, k, v on one rank
    nvlink = 4 * (g - 1) / g * local                           # q, k, v in and out back
    network = 2 * (nodes - 1) * local                         # the K/V block (2c tokens, H/G heads), N-1 hops
    return {"link_bytes_per_rank": nvlink + network, "network_bytes_per_rank": network,
            "flops": 4 * b * h * d * sq * sq / 2 / world_size}
