"""Exploit class: a `pkb check` script that leaves by os._exit. Every rank is a thread of pkb's own process, so
an unwatched os._exit in one rank ended pkb itself: exit status 0 or 7, no report, no JSON. Now the exit ends
only that rank's simulated process: the report's first line names the rank and the line, --json still prints,
and the exit code is 8 (docs/check.md). Each case has an honest twin that returns normally or exits at the
very end, after every rank got what it needed."""
import json

import pytest

from pkb.cli.main import main

HEAD = "import os, posix, sys, threading\nimport torch\nimport torch.distributed as dist\n" \
       "dist.init_process_group('gloo')\nx = torch.ones(4)\ndist.all_reduce(x)\n"   # lines 1-6


def _script(tmp_path, body: str, name="prog.py"):
    p = tmp_path / name
    p.write_text(HEAD + body)
    return str(p)


def _line(path, needle):
    return next(i for i, line in enumerate(open(path).read().splitlines(), 1) if needle in line)


def _check(capsys, path, *extra):
    code = main(["check", "--nproc-per-node", "2", "--timeout", "60", *extra, path])
    return code, capsys.readouterr()


MID_RUN = "if dist.get_rank() == 1:\n    {call}\ndist.all_reduce(x)\nprint('rank done')\n"


@pytest.mark.parametrize("call", ["os._exit(0)", "posix._exit(0)"])
def test_os_exit_in_one_rank_mid_run_is_reported_with_rank_and_line(tmp_path, capsys, call):
    path = _script(tmp_path, MID_RUN.format(call=call))
    site = f"prog.py:{_line(path, call)}"
    code, out = _check(capsys, path)
    assert code == 8
    lines = out.out.strip().splitlines()
    assert "rank 1" in lines[0] and site in lines[0] and "os._exit(0)" in lines[0]
    assert lines[-1].startswith("pkb check: prog.py: EXITED (exit 8)")
    assert "[rank 1] rank done" not in out.out   # rank 1 ran no further

    code, out = _check(capsys, path, "--json")
    report = json.loads(out.out)
    assert code == 8 and report["verdict"] == "exited"
    first = report["findings"][0]
    assert first["kind"] == "process_exit" and first["ranks"] == [1] and first["sites"] == [site]


def test_twin_returning_normally_is_ok(tmp_path, capsys):
    path = _script(tmp_path, MID_RUN.format(call="pass"))
    code, out = _check(capsys, path, "--json")
    assert code == 0 and json.loads(out.out)["verdict"] == "ok" and json.loads(out.out)["findings"] == []


def test_twin_exiting_at_the_very_end_is_ok_and_noted(tmp_path, capsys):
    path = _script(tmp_path, "dist.destroy_process_group()\nos._exit(0)\n")
    code, out = _check(capsys, path, "--json")
    report = json.loads(out.out)
    assert code == 0 and report["verdict"] == "ok"
    assert sorted(f["ranks"][0] for f in report["findings"] if f["kind"] == "os_exit") == [0, 1]


def test_a_non_zero_os_exit_at_the_end_is_a_failed_job(tmp_path, capsys):
    path = _script(tmp_path, "rank = dist.get_rank()\ndist.destroy_process_group()\nif rank == 0:\n    os._exit(3)\n")
    code, out = _check(capsys, path)
    assert code == 8 and "rank 0 ended its process with os._exit(3)" in out.out.splitlines()[0]


def test_os_exit_from_a_thread_the_program_started_is_reported(tmp_path, capsys):
    body = "if dist.get_rank() == 0:\n    t = threading.Thread(target=lambda: os._exit(0)); t.start(); t.join()\n" \
           "dist.all_reduce(x)\n"
    path = _script(tmp_path, body)
    code, out = _check(capsys, path)
    first = out.out.splitlines()[0]
    assert code == 8 and "os._exit(0)" in first and f"prog.py:{_line(path, 'threading.Thread')}" in first
    assert "Traceback" not in out.err


def test_the_exited_rank_runs_none_of_its_finally_blocks(tmp_path, capsys):
    body = ("try:\n    if dist.get_rank() == 1:\n        os._exit(0)\n    dist.all_reduce(x)\n"
            "finally:\n    print('cleanup', dist.get_rank())\n")
    code, out = _check(capsys, _script(tmp_path, body))
    assert code == 8 and "[rank 0] cleanup 0" in out.out and "cleanup 1" not in out.out + out.err


def test_sys_exit_in_one_rank_mid_run_names_the_line(tmp_path, capsys):
    path = _script(tmp_path, MID_RUN.format(call="sys.exit(0)"))
    code, out = _check(capsys, path)
    assert code == 3   # a deadlock: rank 0 waits for a rank that left
    assert f"rank 1: left by sys.exit(0) at prog.py:{_line(path, 'sys.exit(0)')}" in out.out


def test_sys_exit_non_zero_mid_run_names_the_line(tmp_path, capsys):
    path = _script(tmp_path, MID_RUN.format(call="sys.exit(2)"))
    code, out = _check(capsys, path, "--json")
    report = json.loads(out.out)
    assert code == 4 and report["verdict"] == "error"
    assert report["findings"][0]["sites"] == [f"prog.py:{_line(path, 'sys.exit(2)')}"]
