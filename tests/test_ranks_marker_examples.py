"""Distributed code unit-tested on simulated ranks with the pytest plugin's marker (pkb/cli/pytest_plugin.py):
each test body runs on every rank with torch.distributed initialised, as under torchrun."""
import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


@pytest.mark.pkb_ranks(4)
def test_all_reduce_sums_every_rank():
    rank, world = dist.get_rank(), dist.get_world_size()
    x = torch.full((3,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    assert x.tolist() == [world * (world + 1) / 2] * 3


def ring_pass(x: torch.Tensor) -> torch.Tensor:
    """Send x to the next rank, receive the previous rank's: even ranks send first, odd ranks receive
    first, so blocking sends never wait on each other all around the ring."""
    rank, world = dist.get_rank(), dist.get_world_size()
    out = torch.empty_like(x)
    if rank % 2 == 0:
        dist.send(x, (rank + 1) % world)
        dist.recv(out, (rank - 1) % world)
    else:
        dist.recv(out, (rank - 1) % world)
        dist.send(x, (rank + 1) % world)
    return out


@pytest.mark.parametrize("world", [pytest.param(2, marks=pytest.mark.pkb_ranks(2)),
                                   pytest.param(4, marks=pytest.mark.pkb_ranks(4))])
def test_ring_send_recv_passes_to_the_next_rank(world):
    rank = dist.get_rank()
    assert dist.get_world_size() == world
    got = ring_pass(torch.tensor([float(rank)], device="cuda"))
    assert got.item() == (rank - 1) % world


@pytest.mark.pkb_ranks(4)
def test_batched_ring_exchange_both_ways():
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = torch.tensor([float(rank)], device="cuda")
    left, right = torch.empty_like(mine), torch.empty_like(mine)
    ops = [dist.P2POp(dist.isend, mine, (rank + 1) % world), dist.P2POp(dist.isend, mine, (rank - 1) % world),
           dist.P2POp(dist.irecv, left, (rank - 1) % world), dist.P2POp(dist.irecv, right, (rank + 1) % world)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert (left.item(), right.item()) == ((rank - 1) % world, (rank + 1) % world)


@pytest.mark.pkb_ranks(4)
def test_all_gather_into_tensor_orders_by_rank():
    rank, world = dist.get_rank(), dist.get_world_size()
    out = torch.empty(world * 2, device="cuda")
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank), device="cuda"))
    assert out.tolist() == [float(r) for r in range(world) for _ in range(2)]


@pytest.mark.pkb_ranks(2)
def test_ddp_averages_gradients_across_ranks():
    rank = dist.get_rank()
    torch.manual_seed(0)   # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = DistributedDataParallel(nn.Linear(4, 1).cuda())
    torch.manual_seed(1 + rank)   # different data per rank
    model(torch.randn(8, 4, device="cuda")).sum().backward()
    grads = [torch.empty_like(model.module.weight.grad) for _ in range(dist.get_world_size())]
    dist.all_gather(grads, model.module.weight.grad)
    torch.testing.assert_close(grads[0], grads[1])
