"""The labelled inline-CUDA corpus (tests/corpus_cuda): every program gets its labelled verdict at every
world size it lists. Each program builds its own extension (about a minute, cached afterwards): slow."""
import os

import pytest
from conftest import HERE

from pkbsim.corpus import load_corpus, run_case
from pkbsim.ptx.compile import find_nvcc

CORPUS = os.path.join(HERE, "corpus_cuda")
CASES = load_corpus(CORPUS) if os.path.isdir(CORPUS) else []
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found: inline CUDA cannot be built")]
# known misses, each with its cause (strict: the test fails once the simulator catches them)
KNOWN_MISSES = {
    "cuda_D6_one_shot_no_exit_barrier_bug.py": "the blocks of one rank share one vector clock: block 1's entry "
                                               "barrier orders block 0's reads as if blocks ran in order",
}


def _runs():
    for c in CASES:
        for n in c.world_sizes:
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
