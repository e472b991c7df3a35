"""Exploit class: a candidate that writes in the folder where the trusted side writes timelines, to rewrite
another candidate's timeline or to plant a FIFO where its own will go. The candidate's process sees that
folder read-only (its own mount namespace): both attempts are refused, the screen writes the real
timeline, and the honest call passes. Twin: the same candidate with no timeline folder to attack passes too,
and the folder's other file is left as it was."""
import json
import os
import stat
import subprocess

from hostile import BOUND_S, PKB, path


def _screen(name: str, timeline: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PKB, "screen", path(name), "--task", "all_reduce", "--world-size", "2", "--json",
                           "--timeline", timeline], capture_output=True, text=True, timeout=BOUND_S,
                          env=dict(os.environ, PKB_PROBE_TIMELINE=timeline))


def test_a_candidate_cannot_write_where_the_judge_writes_timelines(tmp_path):
    folder = tmp_path / "timelines"
    folder.mkdir()
    (folder / "other.json").write_text('{"traceEvents": []}')
    timeline = str(folder / "mine.json")
    proc = _screen("plant_timeline.py", timeline)
    assert "probe: overwrite refused" in proc.stderr and "probe: fifo refused" in proc.stderr, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["verdict"] == "pass", proc.stdout
    assert (folder / "other.json").read_text() == '{"traceEvents": []}'
    assert stat.S_ISREG(os.lstat(timeline).st_mode) and "traceEvents" in json.loads(open(timeline).read())


def test_the_honest_twin_writes_its_timeline(tmp_path):
    timeline = str(tmp_path / "t" / "honest.json")
    proc = _screen("honest_all_reduce.py", timeline)
    assert json.loads(proc.stdout)["verdict"] == "pass", proc.stdout
    assert "traceEvents" in json.loads(open(timeline).read())
