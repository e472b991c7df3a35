"""Exploit class: a candidate that stops or kills the screening process (or, in `pkb run`, its worker's
zygote, so every later candidate of the worker fails). No process outside the candidate's own PID
namespace has a number it can name, so `pkb screen` still answers its verdict (a reject: the input comes
back unreduced) and the next candidate of the same worker, the honest twin, still passes."""
from hostile import run, screen


def test_the_screen_survives_and_rejects():
    code, res, _ = screen("signal_the_judge.py")
    assert (code, res["verdict"], res["reasons"][0]["kind"]) == (1, "reject", "wrong_output")


def test_the_next_candidate_of_the_worker_is_screened_as_usual(tmp_path):
    rows = run(["signal_the_judge.py", "honest_all_reduce.py"], str(tmp_path / "r.sqlite"))
    assert rows["signal_the_judge.py"]["verdict"] == "reject"
    assert rows["honest_all_reduce.py"]["verdict"] == "pass", rows["honest_all_reduce.py"]["reasons"]


def test_a_candidate_that_stops_itself_is_a_named_reject_at_once():
    code, res, _ = screen("stop_itself.py")
    assert (code, res["verdict"], res["reasons"][0]["kind"]) == (1, "reject", "crash")
    assert "stopped itself" in res["reasons"][0]["message"]
