"""Slab <-> pencil transposes of a 2-D spectrum, shared by the distributed rfft2 / irfft2 tasks.

The field (..., H, W) is split by rows: rank r holds rows [r*H/ws, (r+1)*H/ws). Its half spectrum
(..., H, W//2+1) is split by frequency columns as torch.tensor_split splits W//2+1 into ws chunks (the
first chunks one column wider when it does not divide), so the transform along H can run locally.
Blocks travel packed in one flat buffer through all_to_all_single with uneven splits (which NCCL and
gloo both support), complex values as their real view.
"""
import torch
import torch.distributed as dist


def column_counts(n_cols: int, world: int) -> list[int]:
    """Frequency columns owned by each rank (torch.tensor_split's rule)."""
    return [n_cols // world + (1 if r < n_cols % world else 0) for r in range(world)]


def rows_to_columns(spec: torch.Tensor) -> torch.Tensor:
    """(..., H/ws, C) complex row slab -> (..., H, C_r) complex column block of this rank."""
    world, rank = dist.get_world_size(), dist.get_rank()
    counts = column_counts(spec.shape[-1], world)
    per_column = spec[..., 0].numel() * 2  # real numbers in one column of this slab
    send = torch.cat([torch.view_as_real(c).reshape(-1) for c in spec.split(counts, dim=-1)])
    recv = send.new_empty(world * per_column * counts[rank])
    dist.all_to_all_single(recv, send, [per_column * counts[rank]] * world, [per_column * c for c in counts])
    blocks = recv.view(world, *spec.shape[:-1], counts[rank], 2).movedim(0, -4)  # (..., ws, H/ws, C_r, 2)
    return torch.view_as_complex(blocks.reshape(*spec.shape[:-2], -1, counts[rank], 2).contiguous())


def columns_to_rows(spec: torch.Tensor, n_cols: int) -> torch.Tensor:
    """(..., H, C_r) complex column block -> (..., H/ws, n_cols) complex row slab of this rank."""
    world = dist.get_world_size()
    counts = column_counts(n_cols, world)
    rows = spec.shape[-2] // world
    slabs = torch.view_as_real(spec).reshape(*spec.shape[:-2], world, rows, spec.shape[-1], 2)
    send = slabs.movedim(-4, 0).reshape(-1)  # grouped by destination rank
    per_column = send.numel() // (world * spec.shape[-1])
    recv = send.new_empty(per_column * n_cols)
    dist.all_to_all_single(recv, send, [per_column * c for c in counts], [send.numel() // world] * world)
    blocks = [b.view(*spec.shape[:-2], rows, c, 2) for b, c in zip(recv.split([per_column * c for c in counts]),
                                                                     counts)]
    return torch.view_as_complex(torch.cat(blocks, dim=-2))
