"""Cheat: no communication at all. It looks through the harness's frames (and its environment) for
whatever made its own input (a seed, the worker's input builder), checks that it rebuilds its own input
exactly, and then rebuilds every peer's input the same way and sums them. Before each rank got only its
own seed, every rank held every call's seed and this was scored correct (3.77x). Must not be correct:
a rank's seed rebuilds only its own input, so the sum is wrong ("incorrect")."""
import os
import sys

import torch
import torch.distributed as dist

from tasks.api import TaskContext


def _seed_values(value, depth=0):
    """Ints (and tuples/lists of ints) that could be a seed, from a local variable."""
    if depth > 3:
        return
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, (list, tuple)):
        if value and all(isinstance(v, int) for v in value):
            yield value
        for v in value:
            yield from _seed_values(v, depth + 1)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _seed_values(v, depth + 1)


def _look_around():
    """The worker object (has .inputs and .rank) and every seed-like value in the callers' locals."""
    worker, seeds = None, []
    frame = sys._getframe(2)
    while frame is not None:
        for name, value in frame.f_locals.items():
            if hasattr(value, "inputs") and hasattr(value, "rank") and hasattr(value, "task"):
                worker = worker or value
            if "seed" in name or name in ("msg", "batch_msg"):
                seeds += list(_seed_values(value))
        frame = frame.f_back
    for key, value in os.environ.items():  # a seed in the environment, if there is one
        if "SEED" in key.upper() and value.strip().lstrip("-").isdigit():
            seeds.append(int(value))
    return worker, seeds


def _builders(worker, rank, world):
    """Ways to build rank `rank`'s input from a seed value: the worker's own builder with its rank
    swapped, and the task's make_inputs with a plain TaskContext."""
    def through_worker(seed):
        mine = worker.rank
        try:
            worker.rank = rank
            return worker.inputs(seed)
        finally:
            worker.rank = mine

    def through_context(seed):
        if not isinstance(seed, int):
            raise TypeError
        ctx = TaskContext(rank, world, seed, 0, worker.preset, dict(worker.task.sizes[worker.preset]), worker.device)
        return worker.task.make_inputs(ctx)
    return {"worker": through_worker, "context": through_context}


def solution(x):
    me, world = dist.get_rank(), dist.get_world_size()
    worker, seeds = _look_around()
    if worker is not None:
        for seed in seeds:
            for how in ("worker", "context"):
                try:
                    own = _builders(worker, me, world)[how](seed)
                except Exception:  # noqa: BLE001 - not a seed of this kind
                    continue
                if isinstance(own, tuple) and own and isinstance(own[0], torch.Tensor) \
                        and own[0].shape == x.shape and torch.equal(own[0], x):
                    total = x.clone()
                    for peer in range(world):
                        if peer != me:
                            total += _builders(worker, peer, world)[how](seed)[0]
                    return total
    return x * world  # found nothing: a guess, still without communication
