"""The labelled inline-CUDA corpus (tests/corpus_cuda): programs get their labelled verdicts.

Each program builds its own extension (about 27 s on 2 cores, cached afterwards), so by default three pairs
of different mechanisms run at their smallest world size (six builds on a clean machine; the suite is at its
30-minute line, and the Triton corpus covers the missing entry barrier, D5, at two world sizes); with
PKB_CUDA_CORPUS=all every program runs at every world size it lists, as `benchmarks/corpus_report.py
--corpus tests/corpus_cuda` does."""
import os

import pytest
from conftest import HERE

from pkb.corpus import load_corpus, run_case
from pkbsim.cuda.toolchain import unavailable

CORPUS = os.path.join(HERE, "corpus_cuda")
CASES = load_corpus(CORPUS) if os.path.isdir(CORPUS) else []
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]
# known misses, each with its cause (strict: the test fails once the simulator catches them)
KNOWN_MISSES = {
    "cuda_D2_ll_flag_constant_bug.py": "data and flag travel in one 8-byte store, so every access is a flag poll "
                                       "and the stale-flag check (a wait followed by a data access) never fires",
}


# a hang on device flags, a missing fence (a race), a wrong result without protocol errors
DEFAULT_PAIRS = ("cuda_D1_barrier_constant_flag", "cuda_D4_ring_push_no_fence", "cuda_W1_reduce_scatter_off_by_one")


def _runs():
    everything = os.environ.get("PKB_CUDA_CORPUS") == "all"
    for c in CASES:
        if not everything and c.name.rsplit("_", 1)[0] not in DEFAULT_PAIRS:
            continue
        for n in c.world_sizes if everything else c.world_sizes[:1]:
            miss = KNOWN_MISSES.get(c.name)
            yield pytest.param(c, n, marks=[pytest.mark.xfail(strict=True, reason=miss)] if miss else [],
                               id=f"{c.name}-{n}")


def test_corpus_is_paired():
    names = {c.name: c for c in CASES}
    assert CASES, "tests/corpus_cuda holds no labelled programs"
    for c in CASES:
        assert c.twin in names, f"{c.name}: twin {c.twin!r} missing"
        assert (c.expect == "ok") != (names[c.twin].expect == "ok"), f"{c.name} and its twin: one buggy, one fixed"


@pytest.mark.parametrize("case,world_size", list(_runs()))
def test_corpus_cuda_verdict(case, world_size):
    outcome = run_case(case, world_size, timeout=120)
    assert outcome.verdict == case.expect, outcome.message
