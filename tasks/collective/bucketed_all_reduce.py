"""Bucketed gradient all-reduce (average) of a model's parameter gradients: PyTorch DDP's Reducer.

The input is the list of gradients of a small GPT-style model (token embedding, `LAYERS` transformer
blocks, final LayerNorm), all of different shapes, and DDP's bucket capacity in bytes. The output is the
tuple of gradients averaged over ranks, in parameter order. The reference does what DDP does: it fills
buckets in reverse parameter order (the order backward produces gradients) until a bucket reaches the
capacity, flattens each bucket into one buffer, all-reduces the buckets asynchronously and splits them
back. A solution may bucket, fuse or overlap as it likes; only the averaged gradients are checked.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "bucketed_all_reduce"
ID = 12
TITLE = "Bucketed gradient all-reduce (average) of a transformer's gradients"
CATEGORY = "collective"
ORIGIN = "PyTorch DistributedDataParallel Reducer (gradient buckets, bucket_cap_mb)"
WORLD_SIZES = WorldSizes(min=2)
LAYERS = 2
SIZES = {"screen": {"vocab": 96, "d": 16, "bucket_cap_bytes": 8192},
         # full: 58.7 M parameters (235 MiB of fp32 gradients) in DDP's default 25 MiB buckets
         "full": {"vocab": 32768, "d": 1024, "bucket_cap_bytes": 25 * 2**20}}


def parameter_shapes(size: dict) -> list[tuple[str, tuple]]:
    v, d = size["vocab"], size["d"]
    shapes = [("wte", (v, d))]
    for i in range(LAYERS):
        shapes += [(f"h{i}.ln1.weight", (d,)), (f"h{i}.ln1.bias", (d,)),
                   (f"h{i}.attn.qkv.weight", (3 * d, d)), (f"h{i}.attn.qkv.bias", (3 * d,)),
                   (f"h{i}.attn.proj.weight", (d, d)), (f"h{i}.attn.proj.bias", (d,)),
                   (f"h{i}.ln2.weight", (d,)), (f"h{i}.ln2.bias", (d,)),
                   (f"h{i}.mlp.fc.weight", (4 * d, d)), (f"h{i}.mlp.fc.bias", (4 * d,)),
                   (f"h{i}.mlp.proj.weight", (d, 4 * d)), (f"h{i}.mlp.proj.bias", (d,))]
    return shapes + [("lnf.weight", (d,)), ("lnf.bias", (d,))]


OUTPUTS = [Output(name, torch.float32, shape=lambda size, world_size, rank, k=k: parameter_shapes(size)[k][1])
           for k, (name, _) in enumerate(parameter_shapes({"vocab": 1, "d": 1}))]


def make_inputs(ctx):
    grads = [ctx.randn(*shape) for _, shape in parameter_shapes(ctx.size)]
    return grads, ctx.size["bucket_cap_bytes"]


def reference(grads, bucket_cap_bytes):
    buckets, bucket, nbytes = [], [], 0
    for i in reversed(range(len(grads))):
        bucket.append(i)
        nbytes += grads[i].numel() * grads[i].element_size()
        if nbytes >= bucket_cap_bytes:
            buckets.append(bucket)
            bucket, nbytes = [], 0
    if bucket:
        buckets.append(bucket)
    pending = []
    for bucket in buckets:
        flat = torch.cat([grads[i].reshape(-1) for i in bucket])
        pending.append((bucket, flat, dist.all_reduce(flat, op=dist.ReduceOp.AVG, async_op=True)))
    outs = [None] * len(grads)
    for bucket, flat, work in pending:
        work.wait()
        for i, part in zip(bucket, flat.split([grads[i].numel() for i in bucket])):
            outs[i] = part.view(grads[i].shape)
    return tuple(outs)


def speed_of_light(size, world_size):
    nbytes = sum(torch.Size(shape).numel() for _, shape in parameter_shapes(size)) * 4
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * nbytes, "flops": 0}
