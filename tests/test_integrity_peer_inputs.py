"""Exploit class, on the scorer: a rank that rebuilds its peers' inputs from what it can see (the
harness's frames, its environment) and returns the all_reduce with no communication. Each rank is sent
only its own seed (the scorer derives it from a secret and the rank), so what a rank can see rebuilds its
own input and nothing else: the cheater is incorrect. The honest twin looks at the same things and
communicates: correct, with no finding. Both on gloo at 2 ranks, in the sandbox as CI runs them."""

import pytest


from conftest import score_candidate



@pytest.mark.slow
def test_a_rank_cannot_rebuild_its_peers_inputs():
    res = score_candidate("rebuild_peer_inputs")
    assert res.status == "incorrect" and not res.correct, res
    assert any(f.kind == "incorrect" and "trial0" in f.message for f in res.findings), res.findings


@pytest.mark.slow
def test_the_honest_twin_that_looks_at_the_same_things_is_correct():
    res = score_candidate("rebuild_peer_inputs_honest")
    assert res.correct and res.status in ("faster", "slower"), res
    assert res.findings == [], res.findings
