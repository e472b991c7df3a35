"""Exploit class: in `pkb run`, a candidate that writes result lines for itself (pass) and for the other
files of its batch (reject) into the worker's protocol pipe. The candidate holds no descriptor of the
worker's, and the pool files an answer only under the job it sent, with that job's id. Twin: the honest
file of the same batch passes and the forger is rejected; a line with another id is never believed."""
from hostile import run

from pkb.batch.job import ScreenJob
from pkb.batch.pool import _Worker
from pkbsim.screen.result import ScreenResult


def test_a_candidate_cannot_write_the_batchs_rows(tmp_path):
    rows = run(["forge_batch_rows.py", "honest_all_reduce.py"], str(tmp_path / "r.sqlite"))
    assert (rows["forge_batch_rows.py"]["verdict"], rows["forge_batch_rows.py"]["reasons"][0]["kind"]) == (
        "reject", "wrong_output")
    assert rows["honest_all_reduce.py"]["verdict"] == "pass", rows["honest_all_reduce.py"]["reasons"]


def _worker_waiting_for(job: ScreenJob, job_id: str) -> _Worker:
    w = object.__new__(_Worker)
    w.job, w.job_id = job, job_id
    return w


def _line(job_id: str, candidate: str, verdict: str) -> str:
    res = ScreenResult("all_reduce", candidate, 2, "hgx-h100", 0).to_json()
    import json
    return json.dumps({"id": job_id, "result": dict(res, verdict=verdict)})


def test_only_the_answer_to_the_job_sent_is_filed_and_under_that_job():
    job = ScreenJob("all_reduce", "/c/sent.py", 2, "hgx-h100", 7)
    w = _worker_waiting_for(job, "a" * 32)
    assert w.answer(_line("b" * 32, "/c/sent.py", "pass")) is None          # another id
    assert w.answer("not json") is None
    res = w.answer(_line("a" * 32, "/c/other.py", "reject"))               # the right id, another name
    assert (res.candidate, res.seed, res.verdict.value) == ("/c/sent.py", 7, "reject")
