"""Exploit class: a candidate screened by `pkb run --executor ray` reaching the machine of the Ray node
(integrity_probe.py). A Ray task's body (`screen_one`, called here without Ray, which the tests do not
install) runs the screen in a sandboxed worker of its own, as the local pool does: the probe reaches nothing
and the candidate passes. Its twin, with the sandbox disabled, runs in the task's own process, where the
probe gets out and the candidate is rejected. A node without bwrap answers inconclusive, naming the fix."""
from integrity_probe import probe  # noqa: F401 - the fixture

from pkb.batch.job import ScreenJob
from pkb.batch.ray_executor import screen_one


def _job(path):
    return ScreenJob("all_reduce", str(path), 2, "hgx-h100", 1, cost=False)


def test_a_ray_task_screens_in_the_sandbox(probe):  # noqa: F811
    path, target = probe
    res = screen_one(_job(path), 300, 0)
    assert res.verdict == "pass", res.reasons
    assert not target.exists()


def test_with_the_sandbox_disabled_the_same_candidate_gets_out(probe, monkeypatch):  # noqa: F811
    path, target = probe
    monkeypatch.setenv("PKB_NO_SANDBOX", "1")
    res = screen_one(_job(path), 300, 0)
    assert res.verdict == "reject" and res.reasons[0].kind == "wrong_output", res.reasons
    assert target.read_text() == "written from a candidate"


def test_a_ray_node_without_bwrap_is_inconclusive_naming_the_fix(probe, monkeypatch):  # noqa: F811
    import candidate_sandbox
    path, _ = probe
    monkeypatch.setenv("PKB_BWRAP", "/nonexistent/bwrap")
    candidate_sandbox.check.cache_clear()
    try:
        res = screen_one(_job(path), 300, 0)
    finally:
        candidate_sandbox.check.cache_clear()
    assert res.verdict == "inconclusive" and "bwrap" in res.reasons[0].message, res
