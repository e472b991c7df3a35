"""Inline CUDA on simulated ranks with TMA (tests/programs/cuda_tma_peer_copy.py, one build): the host's
cuTensorMapEncodeTiled reaches pkb's driver stand-in, the kernel's bulk tensor copies of a peer's symmetric
buffer give the right result, and they are seen by the race check (the twin without a barrier between the
peer's fill and the TMA read is a race). The cold build (the extension and pkb's driver stand-in) took 194 s
on this 2-core machine under load, more than the whole suite can spare under its 30-minute limit, so these
run only with PKB_CUDA_CORPUS=all, like the full CUDA corpus; the PTX-level tests (tests/ptx/test_tma_*.py,
about 2 s) cover the copies, swizzles and mbarriers in every run."""
import os

import pytest
from conftest import check_program

from pkbsim.cuda.toolchain import unavailable

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())),
              pytest.mark.skipif(os.environ.get("PKB_CUDA_CORPUS") != "all",
                                 reason="a cold build of minutes: set PKB_CUDA_CORPUS=all to run it")]


def test_a_tma_copy_of_a_peers_buffer_is_right():
    res, out = check_program("cuda_tma_peer_copy.py", "ok", 2)
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert "copied 0" in out and "copied 1" in out


def test_a_tma_read_racing_the_peers_fill_is_a_race():
    res, _ = check_program("cuda_tma_peer_copy.py", "no_barrier", 2)
    assert res.verdict != "ok", "the TMA read of the peer's buffer went unseen"
    text = " ".join(f.render() for f in res.findings)
    assert "cuda_tma_peer_copy.py" in text, text
