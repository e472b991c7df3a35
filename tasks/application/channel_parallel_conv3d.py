"""Input-channel-parallel 3-D convolution: Megatron's row-parallel pattern applied to a Conv3d of a video
or volumetric model (the tensor-parallel 3-D convolutions of video VAEs / diffusion backbones), where
each rank holds a slice of the input channels and the partial outputs are reduce-scattered.

Rank r holds input channels [r*C_in/ws, (r+1)*C_in/ws) of the activation x (B, C_in/ws, T, H, W) bf16 and
the matching slice of the weight (C_out, C_in/ws, k, k, k) bf16; the bias (C_out,) bf16 is identical on
every rank. Each rank convolves its channels into a partial output for every output channel (stride 1,
zero padding k//2), (B, C_out, T, H, W); a reduce-scatter over the output channels sums the partials
over ranks and leaves rank r with output channels [r*C_out/ws, (r+1)*C_out/ws), to which it adds its
slice of the bias.
Output per rank: (B, C_out/ws, T, H, W) bf16, the rank's output channels of the full convolution.

Tolerance: bf16 defaults. The partials are bf16 (fp32 accumulation, rounded) and are summed in bf16 by
the reduce-scatter, as NCCL does; the weights are scaled so that outputs are O(1), and ws rounded partials
of size O(1/sqrt(ws)) stay well inside rtol 2e-2 + atol 1e-2.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "channel_parallel_conv3d"
ID = 112
TITLE = "Input-channel-parallel Conv3d: partial convolutions reduce-scattered over output channels"
CATEGORY = "application"
ORIGIN = "Megatron-LM RowParallelLinear pattern on Conv3d (tensor-parallel video VAE / video diffusion blocks)"
WORLD_SIZES = WorldSizes(min=2)
# full: a 512-channel video VAE decoder block, 8 latent frames of 64 x 64, 3x3x3 kernel, 8 GPUs
SIZES = {"screen": {"batch": 1, "c_in_per_rank": 4, "c_out_per_rank": 2, "frames": 4, "height": 6,
                    "width": 6, "kernel": 3},
         "full": {"batch": 1, "c_in_per_rank": 64, "c_out_per_rank": 64, "frames": 8, "height": 64,
                  "width": 64, "kernel": 3}}
OUTPUTS = [Output("out", torch.bfloat16, shape=lambda s, ws, r: (
    s["batch"], s["c_out_per_rank"], s["frames"], s["height"], s["width"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    k, c_in, c_out = s["kernel"], s["c_in_per_rank"], s["c_out_per_rank"] * ws
    x = ctx.randn(s["batch"], c_in, s["frames"], s["height"], s["width"], dtype=torch.bfloat16)
    weight = ctx.randn(c_out, c_in, k, k, k, dtype=torch.bfloat16, scale=(c_in * ws * k ** 3) ** -0.5)
    bias = ctx.randn(c_out, dtype=torch.bfloat16, scale=0.1, shared=True)
    return x, weight, bias


def reference(x, weight, bias):
    world, rank = dist.get_world_size(), dist.get_rank()
    partial = F.conv3d(x, weight, padding=weight.shape[-1] // 2)
    by_channel = partial.transpose(0, 1).contiguous()  # output channels first, for the scatter
    mine = by_channel.new_empty(by_channel.shape[0] // world, *by_channel.shape[1:])
    dist.reduce_scatter_tensor(mine, by_channel)
    block = bias.chunk(world)[rank]
    return (mine + block.view(-1, *[1] * (mine.dim() - 1))).transpose(0, 1).contiguous()


def speed_of_light(size, world_size):
    b, ci, co, t, h, w, k = (size[n] for n in ("batch", "c_in_per_rank", "c_out_per_rank", "frames", "height",
                                               "width", "kernel"))
    partial_bytes = b * co * world_size * t * h * w * 2
    return {"link_bytes_per_rank": (world_size - 1) / world_size * partial_bytes,
            "flops": 2 * b * co * world_size * ci * k ** 3 * t * h * w}
