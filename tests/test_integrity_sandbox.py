"""Exploit class: a candidate that reaches the machine from its process (integrity_probe.py). Inside the
sandbox (the default) it reaches nothing, so it returns the right answer and passes; its twin is the same
file under --no-sandbox, where every probe succeeds and the candidate, which returns zeros once it got out,
is rejected. Also: with no bwrap, a one-line error naming the package."""
from integrity_probe import probe  # noqa: F401 - the fixture

from pkb.cli.main import main

from conftest import screen_json


def test_inside_the_sandbox_the_candidate_reaches_nothing(capsys, probe):  # noqa: F811
    path, target = probe
    code, res = screen_json(capsys, path)
    assert (code, res["verdict"]) == (0, "pass"), res["reasons"]
    assert not target.exists()


def test_without_it_the_same_candidate_gets_out(capsys, probe):  # noqa: F811
    path, target = probe
    code, res = screen_json(capsys, path, "--no-sandbox")
    assert (code, res["verdict"], res["reasons"][0]["kind"]) == (1, "reject", "wrong_output")
    assert target.read_text() == "written from a candidate"


def test_no_bwrap_is_one_line_naming_the_package(capsys, probe, monkeypatch):  # noqa: F811
    path, _ = probe
    monkeypatch.setenv("PKB_BWRAP", "")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["screen", str(path), "--task", "all_reduce", "--world-size", "2", "--no-cost"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err) and len(err.splitlines()) == 1 and "apt-get install bubblewrap" in err and "--no-sandbox" in err
