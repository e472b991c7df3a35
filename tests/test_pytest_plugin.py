"""The pytest plugin (pkb/cli/pytest_plugin.py), as a user meets it: pytest run in a subprocess on a generated test
file of buggy cases and their fixed twins; each case's outcome and failure text read from the JUnit XML. One
run serves every case (a pytest start with torch costs seconds); -n 2 (slow), -x -k and `-p pkb` get a run each."""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

CASES = '''
import pytest
import torch
import torch.distributed as dist


@pytest.mark.pkb_ranks(4)
def test_deadlock_buggy():
    x = torch.ones(2, device="cuda")
    if dist.get_rank() != 2:   # rank 2 skips the collective
        dist.all_reduce(x)


@pytest.mark.pkb_ranks(4)
def test_deadlock_fixed():
    x = torch.ones(2, device="cuda")
    dist.all_reduce(x)
    assert x.tolist() == [4.0, 4.0]


@pytest.mark.pkb_ranks(4)
def test_assert_buggy():
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = torch.arange(8.0, device="cuda").chunk(world)[rank]
    if rank % 2:
        shard = shard.flip(0)   # odd ranks reverse their shard
    assert shard[0] < shard[1], f"rank {rank}: shard out of order"
    dist.all_reduce(shard)


@pytest.mark.pkb_ranks(4)
def test_assert_fixed():
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = torch.arange(8.0, device="cuda").chunk(world)[rank]
    assert shard[0] < shard[1], f"rank {rank}: shard out of order"
    dist.all_reduce(shard)
    assert shard.tolist() == [12.0, 16.0]


@pytest.mark.pkb_ranks(2)
def test_mismatch_buggy():
    x = torch.ones(2, device="cuda")
    if dist.get_rank() == 0:
        dist.all_reduce(x)
    else:
        dist.broadcast(x, src=0)


@pytest.mark.pkb_ranks(2)
def test_mismatch_fixed():
    x = torch.ones(2, device="cuda")
    dist.broadcast(x, src=0)


@pytest.mark.pkb_ranks(2)
def test_race_buggy():
    x = torch.ones(2, device="cuda")
    dist.all_reduce(x, async_op=True)   # never waited


@pytest.mark.pkb_ranks(2)
def test_race_fixed():
    x = torch.ones(2, device="cuda")
    dist.all_reduce(x, async_op=True).wait()
    assert x.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("scale", [1.0, 3.0])
@pytest.mark.pkb_ranks(2, topology="hgx-b200")
def test_fixtures_and_topology(scale, tmp_path):
    assert "B200" in torch.cuda.get_device_properties(0).name
    x = torch.full((1,), scale, device="cuda")
    dist.all_reduce(x)
    assert x.item() == 2 * scale and tmp_path.is_dir()


@pytest.mark.pkb_ranks(2)
def test_skip_in_ranks():
    pytest.skip("every rank skips")


@pytest.mark.pkb_ranks(0)
def test_zero_ranks():
    pass


@pytest.mark.pkb_ranks(2, timeut=5)
def test_misspelt_keyword():
    pass
'''

TWINS = ("deadlock", "assert", "mismatch", "race")


def _line(snippet: str) -> str:
    """test_cases.py:N of the first line of CASES that holds `snippet`."""
    return f"test_cases.py:{next(i for i, line in enumerate(CASES.splitlines(), 1) if snippet in line)}"


def _pytest(tmp_path, *args, env=None) -> dict:
    """Run pytest on the generated cases; {test name: (outcome, failure text)} from its JUnit XML."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")   # the root: not this repository's configuration
    (tmp_path / "test_cases.py").write_text(CASES)
    xml = tmp_path / "report.xml"
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--strict-markers",
                           f"--junitxml={xml}", *args, "test_cases.py"], cwd=tmp_path, env=base | (env or {}),
                          capture_output=True, text=True, timeout=600)
    assert xml.exists(), proc.stdout + proc.stderr
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        bad = [c for c in case if c.tag in ("failure", "error", "skipped")]
        text = (bad[0].text or bad[0].get("message", "")).replace(f"{tmp_path}{os.sep}", "") if bad else ""
        out[case.get("name")] = (bad[0].tag if bad else "passed", text)
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return _pytest(tmp_path_factory.mktemp("plain"))


@pytest.mark.parametrize("bug", TWINS)
def test_fixed_twin_passes(plain, bug):
    assert plain[f"test_{bug}_fixed"] == ("passed", "")


def test_deadlock_fails_with_the_report(plain):
    outcome, text = plain["test_deadlock_buggy"]
    assert outcome == "failure"
    assert "DEADLOCK: 3 of 4 ranks are blocked" in text
    assert "missing ranks [2]" in text and _line("dist.all_reduce(x)") in text   # who is missing, where others wait
    assert "pkb check: test_deadlock_buggy: DEADLOCK - 4 ranks" in text


def test_rank_assertion_names_every_failing_rank(plain):
    outcome, text = plain["test_assert_buggy"]
    assert outcome == "failure"
    for rank in (1, 3):   # both fail before any communication: each is reported, not only the first
        assert f"rank {rank} raised AssertionError: rank {rank}: shard out of order" in text
    assert "rank 0 raised" not in text and "rank 2 raised" not in text
    assert f"{_line('shard out of order')} in test_assert_buggy" in text
    assert "pytest_plugin.py" not in text   # the report starts at the test's own frames


def test_mismatch_fails_with_the_report(plain):
    outcome, text = plain["test_mismatch_buggy"]
    assert outcome == "failure"
    assert "MISMATCH: collective mismatch on group WORLD" in text
    assert "rank 0 called all_reduce" in text and "rank 1 called broadcast" in text


def test_unwaited_async_op_fails_as_a_race(plain):
    outcome, text = plain["test_race_buggy"]
    assert outcome == "failure" and f"an async operation issued at {_line('# never waited')}" in text
    assert "RACE: rank 0: " in text and "RACE: rank 1: " in text


def test_fixtures_parametrize_and_topology(plain):
    assert plain["test_fixtures_and_topology[1.0]"] == plain["test_fixtures_and_topology[3.0]"] == ("passed", "")


def test_skip_in_every_rank_skips(plain):
    assert plain["test_skip_in_ranks"] == ("skipped", f"{_line('every rank skips')}: every rank skips")


def test_bad_marker_arguments_fail_in_one_line(plain):
    assert plain["test_zero_ranks"] == ("failure", "pkb_ranks: --nproc-per-node and --nnodes must be at least 1")
    outcome, text = plain["test_misspelt_keyword"]
    assert outcome == "failure" and text.startswith("pkb_ranks: unknown keyword(s) timeut; use nnodes, timeout")
    assert "\n" not in text


def _findings(out: dict) -> dict:
    """Outcomes and the findings' head lines, each as its kind and the ranks it names, in any order (which
    ranks a failure released from their waits, and which rank a mismatch names first, depend on the threads'
    schedule)."""
    return {name: (outcome, {(line.split(":")[0], frozenset(re.findall(r"rank \d+", line)))
                             for line in text.splitlines() if line[:1].isalpha() and not line.startswith("pkb check:")})
            for name, (outcome, text) in out.items()}


@pytest.mark.slow   # two workers, each starting torch
def test_xdist_gives_the_same_outcomes(plain, tmp_path):
    assert _findings(_pytest(tmp_path, "-n", "2")) == _findings(plain)


def test_exitfirst_and_keyword_selection(tmp_path):
    out = _pytest(tmp_path, "-x", "-k", "deadlock")
    assert list(out) == ["test_deadlock_buggy"] and out["test_deadlock_buggy"][0] == "failure"


def test_dash_p_pkb_where_autoloading_is_off(tmp_path):
    out = _pytest(tmp_path, "-p", "pkb", "-k", "fixed", env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert out == {f"test_{bug}_fixed": ("passed", "") for bug in TWINS}


def test_loading_the_plugin_imports_no_torch():
    code = "import sys, pkb.cli.pytest_plugin; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pkbsim')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "[]\n"
