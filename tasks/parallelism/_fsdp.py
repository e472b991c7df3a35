"""The FSDP step shared by the FSDP and HSDP tasks: a residual tanh MLP whose layer weights are sharded
by rows, gathered layer by layer (next one prefetched) for forward and again for backward, with each
weight gradient reduce-scattered as soon as it exists, then AdamW on the local shard."""
import torch
import torch.distributed as dist

BETA1, BETA2, EPS = 0.9, 0.999, 1e-8


def sharded_grads(x, y, w_shard, shard_group=None, replicate_group=None):
    """Gradient of the local weight shard (layers, rows, d), averaged over the shard group and, with a
    replicate group (HSDP), over the replicas too."""
    layers, rows, d = w_shard.shape

    def gather(layer):
        full = torch.empty(d, d, device=x.device)
        return full, dist.all_gather_into_tensor(full, w_shard[layer], group=shard_group, async_op=True)

    # forward: all-gather layer by layer (next one prefetched), keep activations, free the weights
    hs, ts = [x], []
    nxt = gather(0)
    for layer in range(layers):
        w_full, work = nxt
        work.wait()
        if layer + 1 < layers:
            nxt = gather(layer + 1)
        t = torch.tanh(hs[-1] @ w_full.t())
        ts.append(t)
        hs.append(hs[-1] + t)
        del w_full
    # backward: all-gather again, reduce-scatter each weight gradient as soon as it exists
    g = (hs[-1] - y) / x.shape[0]
    grads, works = [None] * layers, []
    nxt = gather(layers - 1)
    for layer in reversed(range(layers)):
        w_full, work = nxt
        work.wait()
        if layer > 0:
            nxt = gather(layer - 1)
        g_pre = g * (1 - ts[layer] * ts[layer])
        g_w = g_pre.t() @ hs[layer]
        if layer > 0:
            g = g + g_pre @ w_full
        grads[layer] = torch.empty(rows, d, device=x.device)
        if replicate_group is None:
            works.append(dist.reduce_scatter_tensor(grads[layer], g_w, op=dist.ReduceOp.AVG, group=shard_group,
                                                    async_op=True))
        else:
            dist.reduce_scatter_tensor(grads[layer], g_w, op=dist.ReduceOp.AVG, group=shard_group)
            works.append(dist.all_reduce(grads[layer], op=dist.ReduceOp.AVG, group=replicate_group,
                                         async_op=True))
        del w_full
    for work in works:
        work.wait()
    return torch.stack(grads)


def adamw(w_shard, grad, m, v, lr, wd, step):
    p = w_shard * (1 - lr * wd)
    m = BETA1 * m + (1 - BETA1) * grad
    v = BETA2 * v + (1 - BETA2) * grad * grad
    p = p - lr * (m / (1 - BETA1 ** step)) / ((v / (1 - BETA2 ** step)).sqrt() + EPS)
    return p, m, v
