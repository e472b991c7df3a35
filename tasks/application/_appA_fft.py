"""Slab <-> pencil transposes of a 2-D spectrum, shared by the distributed rfft2 / irfft2 tasks.

The field (..., H, W) is split by rows: rank r holds rows [r*H/ws, (r+1)*H/ws). Its half spectrum
(..., H, W//2+1) is split by frequency columns as torch.tensor_split splits W//2+1 into ws chunks (the
first chunks one column wider when it does not divide), so the transform along H can run locally.
Complex chunks travel as their real view (..., 2), which every backend can move.
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
    send = [torch.view_as_real(c).contiguous() for c in spec.split(counts, dim=-1)]
    recv = [torch.empty(*spec.shape[:-1], counts[rank], 2, dtype=send[0].dtype, device=spec.device)
            for _ in range(world)]
    dist.all_to_all(recv, send)
    return torch.view_as_complex(torch.cat(recv, dim=-3))


def columns_to_rows(spec: torch.Tensor, n_cols: int) -> torch.Tensor:
    """(..., H, C_r) complex column block -> (..., H/ws, n_cols) complex row slab of this rank."""
    world = dist.get_world_size()
    counts = column_counts(n_cols, world)
    send = [torch.view_as_real(c).contiguous() for c in spec.chunk(world, dim=-2)]
    recv = [torch.empty(*send[0].shape[:-2], c, 2, dtype=send[0].dtype, device=spec.device) for c in counts]
    dist.all_to_all(recv, send)
    return torch.view_as_complex(torch.cat(recv, dim=-2))
