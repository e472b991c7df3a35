"""`pkb run` writes its artefacts beside its results file, never into the folder it is run from: the store
and the simulated timelines (pkb_timelines/) go where --db points. Twin: a store in the working folder keeps
its timelines there too (the folder follows the store, not a fixed place)."""
import os
from pkb import batch

CANDIDATE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tasks", "solutions",
                         "all_reduce.py")


def _plan_and_open(db: str) -> list[str]:
    jobs, unpaired = batch.plan(batch.BatchRequest(db, (CANDIDATE,), seed=1, timeout=60.0))
    assert len(jobs) == 1 and not unpaired
    batch.open_store(db)
    return [j.timeline for j in jobs]


def test_timelines_and_store_go_where_db_points(tmp_path, monkeypatch):
    work, results = tmp_path / "work", tmp_path / "results"
    work.mkdir()
    results.mkdir()
    monkeypatch.chdir(work)
    timelines = _plan_and_open(str(results / "r.sqlite"))
    assert all(os.path.dirname(t) == str(results / "pkb_timelines") for t in timelines)
    assert sorted(os.listdir(results)) == ["pkb_timelines", "r.sqlite"]
    assert os.listdir(work) == []


def test_twin_a_store_in_the_working_folder_keeps_its_timelines_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    timelines = _plan_and_open("r.sqlite")
    assert all(os.path.dirname(t) == str(tmp_path / "pkb_timelines") for t in timelines)
    assert sorted(os.listdir(tmp_path)) == ["pkb_timelines", "r.sqlite"]
