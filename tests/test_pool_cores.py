"""The screening pool gives each worker a core of its own: a world pins its rank threads to the lowest
core it may use, so workers free to use every core all pinned their ranks to the same core."""
import os

import pytest

from pkb.batch import pool

CORES = sorted(os.sched_getaffinity(0))


def test_workers_get_the_least_used_core():
    assert pool._free_core([]) == CORES[0]
    if len(CORES) > 1:
        assert pool._free_core([CORES[0]]) == CORES[1]
    assert pool._free_core(CORES) == CORES[0]  # more workers than cores: round robin
    assert pool._free_core(CORES + CORES[1:]) == CORES[0]


@pytest.mark.skipif(len(CORES) < 2, reason="needs two cores")
def test_two_workers_run_on_two_cores_and_their_worlds_ranks_follow():
    workers = [pool._Worker(0, pool._free_core([])), None]
    workers[1] = pool._Worker(0, pool._free_core([workers[0].core]))
    try:
        assert [os.sched_getaffinity(w.proc.pid) for w in workers] == [{CORES[0]}, {CORES[1]}]
    finally:
        for w in workers:
            w.kill()


def test_a_world_pins_its_ranks_to_a_core_its_process_may_use():
    from pkbsim.world.launcher import RunOptions

    os_mask = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {CORES[-1]})  # as a worker given the last core
        assert RunOptions(nproc=2).pin_core == CORES[-1]
    finally:
        os.sched_setaffinity(0, os_mask)
