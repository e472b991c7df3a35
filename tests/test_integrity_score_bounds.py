"""Robustness of `pkb score`: a gloo rank count beyond what the machine can carry is a one-line usage
error naming the bound (the twin: a count at the bound passes that check); a collective left running after
`solution` returned ends in a timeout that says, for each rank, what it was last doing (the twin, which waits
for its thread, is correct). Gloo, 2 ranks, in the sandbox."""
import os

import pytest

from hwbackend import defaults
from hwbackend.score import ScoreRequest, gloo_rank_bound, score
from pkb.cli.main import main

from conftest import HERE, score_candidate

CAND = os.path.join(HERE, "candidates", "reference_copy.py")


def _bound_error(nproc: int, capsys, *extra: str) -> tuple[int, str]:
    rc = main(["score", CAND, "--task", "all_reduce", "--backend", "gloo", "--nproc-per-node", str(nproc), *extra])
    return rc, capsys.readouterr().err


def test_too_many_gloo_ranks_is_a_one_line_error_naming_the_bound(capsys):
    bound = gloo_rank_bound()
    assert bound <= defaults.GLOO_MAX_RANKS
    rc, err = _bound_error(100000, capsys)
    assert rc == 2 and f"the bound for gloo on this machine: {bound}" in err, err
    assert len(err.strip().splitlines()) == 1, err
    with pytest.raises(ValueError, match="gloo ranks per node"):
        score(ScoreRequest("all_reduce", CAND, bound + 1, "gloo"))


def test_a_count_at_the_bound_passes_the_bound_check(capsys):
    rc, err = _bound_error(gloo_rank_bound(), capsys, "--trials", "0")  # stops at the next check, before scoring
    assert rc == 2 and "bound" not in err and "--trials" in err, err



@pytest.mark.slow
def test_a_collective_left_running_ends_in_a_timeout_naming_each_ranks_phase():
    res = score_candidate("collective_after_return", timeout=20)
    assert res.status == "timeout", res
    message = res.findings[0].message
    for rank in (0, 1):  # each silent rank's last step, from the harness's own phases
        assert f"rank {rank}: " in message, message
    # where the stray collective meets the harness's next one depends on thread timing: a timed call's
    # barriers, or those of a timed batch (CI saw the warm-up batch's)
    assert any(step in message for step in ("returned; at the sync and barrier after the call",
                                            "at the sync and barrier before the call", "in candidate",
                                            "at the barrier after the batch")), message


@pytest.mark.slow
def test_the_twin_that_waits_for_its_thread_is_correct():
    res = score_candidate("collective_after_return_honest", timeout=20)
    assert res.correct and res.status in ("faster", "slower"), res
    assert res.findings == [], res.findings
