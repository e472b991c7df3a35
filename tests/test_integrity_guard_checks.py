"""Exploit class, on the scorer: a candidate that rewrites the harness's own input fingerprint and output
check inside its process (their code replaced in place, so no watched name changes and every reference bound
before the import is forged too), then changes its input and returns a view of it. Mutation and aliasing are
judged by the scorer in its own process, from what the rank held after the call, against the reference
job's fingerprints: integrity, named. The honest twin: correct, no finding. Gloo, 2 ranks, in the sandbox."""

import pytest


from conftest import score_candidate



@pytest.mark.slow
def test_rewriting_the_harness_checks_does_not_hide_mutation_or_aliasing():
    res = score_candidate("rewrite_guard_checks")
    assert res.status == "integrity", res
    messages = [f.message for f in res.findings if f.kind == "integrity"]
    assert any("modified its inputs" in m for m in messages), res.findings
    assert any("aliases an input" in m for m in messages), res.findings


@pytest.mark.slow
def test_the_honest_twin_is_correct_with_no_finding():
    res = score_candidate("rewrite_guard_checks_honest")
    assert res.correct and res.status in ("faster", "slower"), res
    assert res.findings == [], res.findings
