"""Inline CUDA on simulated ranks with TMA (tests/programs/cuda_tma_peer_copy.py, one build): the host's
cuTensorMapEncodeTiled reaches pkb's driver stand-in, the kernel's bulk tensor copies of a peer's symmetric
buffer give the right result, and they are seen by the race check (the twin without a barrier between the
peer's fill and the TMA read is a race). Builds take minutes: slow tests."""

import pytest
from conftest import check_program

from pkbsim.cuda.toolchain import unavailable

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]


def test_a_tma_copy_of_a_peers_buffer_is_right():
    res, out = check_program("cuda_tma_peer_copy.py", "ok", 2)
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert "copied 0" in out and "copied 1" in out


def test_a_tma_read_racing_the_peers_fill_is_a_race():
    res, _ = check_program("cuda_tma_peer_copy.py", "no_barrier", 2)
    assert res.verdict != "ok", "the TMA read of the peer's buffer went unseen"
    text = " ".join(f.render() for f in res.findings)
    assert "cuda_tma_peer_copy.py" in text, text
