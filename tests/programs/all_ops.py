"""Every torch.distributed operation pkbsim must support, each checked against its NCCL semantics."""
import os

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh


def check(name, got, want):
    assert torch.equal(got, want), f"{name}: got {got.tolist()} want {want.tolist()}"


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    vals = torch.arange(world, dtype=torch.float32)

    for op, want in [(dist.ReduceOp.SUM, (vals + 1).sum()), (dist.ReduceOp.MAX, vals.max() + 1),
                     (dist.ReduceOp.MIN, vals.min() + 1), (dist.ReduceOp.PRODUCT, (vals + 1).prod()),
                     (dist.ReduceOp.AVG, (vals + 1).mean())]:
        x = torch.full((3,), float(rank + 1), device=dev)
        dist.all_reduce(x, op=op)
        check(f"all_reduce {op}", x, torch.full((3,), float(want)))
    for op, want in [(dist.ReduceOp.BAND, 0), (dist.ReduceOp.BOR, (1 << world) - 1)]:
        x = torch.tensor([1 << rank], device=dev)
        dist.all_reduce(x, op=op)
        check(f"all_reduce {op}", x, torch.tensor([want]))

    x = torch.full((2,), float(rank), device=dev)
    parts = [torch.empty(2, device=dev) for _ in range(world)]
    dist.all_gather(parts, x)
    check("all_gather list", torch.stack(parts), vals[:, None].expand(world, 2))
    out = torch.empty(world * 2, device=dev)
    dist.all_gather_into_tensor(out, x)
    check("all_gather_into_tensor", out, vals.repeat_interleave(2))

    inp = torch.arange(world * 2, dtype=torch.float32, device=dev) + rank
    rs = torch.empty(2, device=dev)
    dist.reduce_scatter_tensor(rs, inp)
    check("reduce_scatter_tensor", rs, (torch.arange(world * 2.0) * world + vals.sum())[2 * rank:2 * rank + 2])
    rs_list = torch.empty(2, device=dev)
    dist.reduce_scatter(rs_list, list(inp.chunk(world)))
    check("reduce_scatter list", rs_list, rs)

    a2a_in = torch.arange(world, dtype=torch.float32, device=dev) + 10 * rank
    a2a_out = torch.empty(world, device=dev)
    dist.all_to_all_single(a2a_out, a2a_in)
    check("all_to_all_single", a2a_out, 10 * vals + rank)
    # uneven: rank r sends j+1 elements to rank j, receives r+1 from everyone
    send = torch.cat([torch.full((j + 1,), float(rank)) for j in range(world)]).to(dev)
    recv = torch.empty(world * (rank + 1), device=dev)
    dist.all_to_all_single(recv, send, [world * 0 + rank + 1] * world, [j + 1 for j in range(world)])
    check("all_to_all_single uneven", recv, vals.repeat_interleave(rank + 1))
    outs = [torch.empty(1, device=dev) for _ in range(world)]
    dist.all_to_all(outs, [torch.tensor([float(rank * world + j)], device=dev) for j in range(world)])
    check("all_to_all list", torch.cat(outs), vals * world + rank)

    b = torch.full((2,), float(rank), device=dev)
    dist.broadcast(b, src=world - 1)
    check("broadcast", b, torch.full((2,), float(world - 1)))
    r = torch.full((2,), 1.0, device=dev)
    dist.reduce(r, dst=0)
    if rank == 0:
        check("reduce", r, torch.full((2,), float(world)))
    g = [torch.empty(1, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.tensor([float(rank)], device=dev), g, dst=0)
    if rank == 0:
        check("gather", torch.cat(g), vals)
    s = torch.empty(1, device=dev)
    dist.scatter(s, [torch.tensor([float(j * 2)], device=dev) for j in range(world)] if rank == 0 else None, src=0)
    check("scatter", s, torch.tensor([2.0 * rank]))
    dist.barrier()

    nxt, prv = (rank + 1) % world, (rank - 1) % world
    t, buf = torch.full((2,), float(rank), device=dev), torch.empty(2, device=dev)
    if rank % 2 == 0:
        dist.send(t, nxt)
        dist.recv(buf, prv)
    else:
        dist.recv(buf, prv)
        dist.send(t, nxt)
    check("send/recv", buf, torch.full((2,), float(prv)))
    if world > 2:  # with 2 ranks nxt == prv: ungrouped isend+irecv to one peer is NCCL's P4 hazard
        reqs = [dist.isend(t, nxt), dist.irecv(buf, prv)]
        for q in reqs:
            q.wait()
        check("isend/irecv", buf, torch.full((2,), float(prv)))
    buf.zero_()
    for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, t, nxt), dist.P2POp(dist.irecv, buf, prv)]):
        q.wait()
    check("batch_isend_irecv", buf, torch.full((2,), float(prv)))

    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": i} for i in range(world)], objs
    lst = [rank, "x"] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [0, "x"], lst
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(rank * 3, gathered, dst=0)
    if rank == 0:
        assert gathered == [i * 3 for i in range(world)], gathered

    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    odds = dist.new_group([r for r in range(world) if r % 2 == 1])
    grp = evens if rank % 2 == 0 else odds
    y = torch.ones(1, device=dev)
    dist.all_reduce(y, group=grp)
    check("new_group all_reduce", y, torch.tensor([float(len([r for r in range(world) if r % 2 == rank % 2]))]))
    if world % 2 == 0:
        sub, _ = dist.new_subgroups(group_size=2)
        z = torch.tensor([float(rank)], device=dev)
        dist.all_reduce(z, group=sub)
        check("new_subgroups", z, torch.tensor([float(2 * (rank // 2) * 2 + 1)]))
        mesh = init_device_mesh("cuda", (world // 2, 2), mesh_dim_names=("dp", "tp"))
        tp = mesh.get_group("tp")
        w = torch.tensor([1.0], device=dev)
        dist.all_reduce(w, group=tp)
        check("device mesh tp", w, torch.tensor([2.0]))

    f = funcol.all_reduce(torch.full((2,), float(rank), device=dev), "sum", dist.group.WORLD)
    check("funcol.all_reduce", torch.as_tensor(f.wait() if hasattr(f, "wait") else f), torch.full((2,), vals.sum()))
    ag = funcol.all_gather_tensor(torch.tensor([float(rank)], device=dev), 0, dist.group.WORLD)
    check("funcol.all_gather_tensor", torch.as_tensor(ag), vals)
    rsf = funcol.reduce_scatter_tensor(torch.ones(world, device=dev), "sum", 0, dist.group.WORLD)
    check("funcol.reduce_scatter_tensor", torch.as_tensor(rsf), torch.tensor([float(world)]))

    c1, c2 = torch.ones(2, device=dev), torch.full((3,), 2.0, device=dev)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(c1)
        dist.all_reduce(c2)
    cm.wait()
    check("coalesced all_reduce", torch.cat([c1, c2]), torch.cat([torch.full((2,), float(world)),
                                                                  torch.full((3,), 2.0 * world)]))

    h = torch.full((2,), 1.0, device=dev)
    work = dist.all_reduce(h, async_op=True)
    work.wait()
    check("async all_reduce", h, torch.full((2,), float(world)))
    dist.destroy_process_group()
    print("all ops ok")


if __name__ == "__main__":
    main()
