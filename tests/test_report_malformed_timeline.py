"""Exploit class: a timeline that is not one pkb wrote. Timelines are written where candidates run (the
screen's workers, in the sandbox, share the store's timelines folder), so one candidate can put anything in
another's: a file that is not JSON, events of the wrong types, a FIFO (which would hang a plain open), a link
to some other file; and a stored result could name any path. `pkb report --html` draws each timeline only
from the file pkb names for the row (never the path in the result), reads it without following links or
blocking, and skips one it cannot draw with a one-line note on stderr and in the page, never a traceback.
The honest twin: a well-formed timeline in the same store is drawn."""
import json
import os
import pathlib

from pkb.batch import timeline_name, timelines_dir
from pkb.cli.main import main
from pkbsim.screen.result import ScreenResult, Stage, Verdict
from pkb.store import ScreenStore

GOOD = {"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 0.0, "dur": 5.0, "name": "all_reduce",
                         "cat": "collective"},
                        {"ph": "X", "pid": 1, "tid": 0, "ts": 1.0, "dur": 4.0, "name": "all_reduce",
                         "cat": "collective"}]}

MALFORMED = {
    "not_json": lambda p: p.write_text("{not json"),
    "numbers": lambda p: p.write_text("[1, 2, 3]"),
    "string_times": lambda p: p.write_text(json.dumps({"traceEvents": [{"ph": "X", "pid": 0, "ts": "soon"}]})),
    "html_in_tid": lambda p: p.write_text(json.dumps({"traceEvents": [{"ph": "X", "pid": 0, "tid": "<script>",
                                                                       "ts": 0, "dur": 1}]})),
    "not_a_trace": lambda p: p.write_text('"just a string"'),
    "deep": lambda p: p.write_text("[" * 100000 + "]" * 100000),
    "fifo": lambda p: os.mkfifo(p),
    "link": lambda p: os.symlink("/etc/hostname", p),
}


def _store(tmp_path, names):
    db = tmp_path / "r.sqlite"
    store = ScreenStore(str(db))
    folder = timelines_dir(str(db))
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for i, name in enumerate(names):
        cand = str(tmp_path / f"{name}.py")
        res = ScreenResult("all_reduce", cand, 2, "hgx-h100", 0, Verdict.PASS, Stage.COST,
                           timeline=os.path.join(folder, timeline_name("all_reduce", cand)))
        store.put(f"sha{i}", res)
        paths[name] = res.timeline
    return db, paths


def _report(db, tmp_path, capsys):
    out = tmp_path / "report.html"
    code = main(["report", "--db", str(db), "--html", str(out)])
    captured = capsys.readouterr()
    return code, out.read_text(), captured.err


def test_malformed_timelines_are_skipped_with_one_line_each(tmp_path, capsys):
    db, paths = _store(tmp_path, ["honest", *MALFORMED])
    with open(paths["honest"], "w") as f:
        json.dump(GOOD, f)
    for name, make in MALFORMED.items():
        make(pathlib.Path(paths[name]))
    code, page, err = _report(db, tmp_path, capsys)
    assert code == 0, err
    assert "Traceback" not in err and "Traceback" not in page
    notes = [line for line in err.splitlines() if line.startswith("pkb report: timeline of")]
    assert len(notes) == len(MALFORMED) and len(err.splitlines()) == len(MALFORMED), err
    for name in MALFORMED:
        assert sum(f"{name}.py skipped" in n for n in notes) == 1, (name, notes)
    assert "<script>" not in page
    # the honest twin in the same store is drawn
    honest = page.split("all_reduce / honest.py</summary>", 1)[1].split("</details>", 1)[0]
    assert honest.count("<rect") == 2 and "rank 1 stream 0" in honest


def test_a_result_naming_another_file_is_not_read(tmp_path, capsys):
    # a stored result whose timeline field names a file elsewhere: the report reads the file pkb names for
    # the row (none here), never that one
    db = tmp_path / "r.sqlite"
    elsewhere = tmp_path / "elsewhere.json"
    with open(elsewhere, "w") as f:
        json.dump({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 0, "dur": 1, "name": "SECRET-NAME"}]}, f)
    ScreenStore(str(db)).put("sha", ScreenResult("all_reduce", str(tmp_path / "c.py"), 2, "hgx-h100", 0,
                                                 Verdict.PASS, Stage.COST, timeline=str(elsewhere)))
    code, page, err = _report(db, tmp_path, capsys)
    assert code == 0 and err == "" and "SECRET-NAME" not in page and "No timeline recorded" in page
    # its twin: the same events at the row's own place are drawn
    own = os.path.join(timelines_dir(str(db)), timeline_name("all_reduce", str(tmp_path / "c.py")))
    os.makedirs(os.path.dirname(own), exist_ok=True)
    os.replace(elsewhere, own)
    code, page, err = _report(db, tmp_path, capsys)
    assert code == 0 and "SECRET-NAME" in page
