"""The parameters of one transformer block as an FSDP2 unit, shared by the FSDP2 all-gather and
reduce-scatter tasks: every parameter is sharded on dim 0 (Shard(0)) over the ranks."""


def parameter_shapes(size: dict) -> list[tuple[str, tuple]]:
    """(name, full shape) of the block's parameters; size has the hidden width D and the MLP width F."""
    d, f = size["hidden"], size["ffn"]
    return [("qkv", (3 * d, d)), ("proj", (d, d)), ("fc1", (f, d)), ("fc2", (d, f)), ("norm1", (d,)), ("norm2", (d,))]


def shard_shape(size: dict, world_size: int, k: int) -> tuple:
    """Shape of rank's dim-0 shard of parameter k."""
    rows, *rest = parameter_shapes(size)[k][1]
    return (rows // world_size, *rest)
