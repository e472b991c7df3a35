"""Owner routing for rows that live on owner ranks (row-sharded tables, graph partitions), shared by the
application tasks that request rows, or send values, to the rank owning each global id.

Rank r owns global ids [r*rows_per_rank, (r+1)*rows_per_rank). A Route groups this rank's items by
owner (stable), exchanges the per-owner counts (a small all-to-all whose counts reach the host, as in
DGL's and TorchRec's dist paths), and then moves payloads with all_to_all_single and uneven splits.
"""
from dataclasses import dataclass

import torch
import torch.distributed as dist


def remote_ids(ctx, rows_per_rank: int, count: int) -> torch.Tensor:
    """`count` distinct global ids, sorted, none owned by this rank (a partition's halo)."""
    others = ctx.randperm((ctx.world_size - 1) * rows_per_rank)[:count].sort().values
    return others + rows_per_rank * (others >= ctx.rank * rows_per_rank)


@dataclass
class Route:
    order: torch.Tensor  # permutation grouping this rank's items by owner rank
    send_splits: list  # items this rank sends to each owner
    recv_splits: list  # items each rank sends to this one

    def to_owners(self, items: torch.Tensor) -> torch.Tensor:
        """Items in this rank's order -> the items owners receive, grouped by sending rank."""
        out = items.new_empty((sum(self.recv_splits),) + tuple(items.shape[1:]))
        dist.all_to_all_single(out, items[self.order].contiguous(), self.recv_splits, self.send_splits)
        return out

    def back_from_owners(self, rows: torch.Tensor) -> torch.Tensor:
        """Owners' answers (in to_owners' received order) -> one answer per item, in this rank's order."""
        back = rows.new_empty((sum(self.send_splits),) + tuple(rows.shape[1:]))
        dist.all_to_all_single(back, rows.contiguous(), self.send_splits, self.recv_splits)
        out = torch.empty_like(back)
        out[self.order] = back
        return out


def route(ids: torch.Tensor, rows_per_rank: int) -> Route:
    """Plan the exchange of items keyed by global `ids` with their owners (exchanges the counts)."""
    world = dist.get_world_size()
    owner = ids // rows_per_rank
    send_counts = torch.zeros(world, dtype=torch.int64, device=ids.device).index_add_(0, owner,
                                                                                       torch.ones_like(owner))
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    return Route(torch.argsort(owner, stable=True), send_counts.tolist(), recv_counts.tolist())


def local_index(owned_ids: torch.Tensor, rows_per_rank: int) -> torch.Tensor:
    """Global ids this rank owns -> row numbers in its shard."""
    return owned_ids - dist.get_rank() * rows_per_rank


def fetch_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Rows of a row-sharded table (this rank's shard: `table`) for global `ids`, in the order of `ids`."""
    rows_per_rank = table.shape[0]
    plan = route(ids, rows_per_rank)
    wanted = plan.to_owners(ids)
    return plan.back_from_owners(table[local_index(wanted, rows_per_rank)])
