"""Verdicts under named rules: pkb's (its GPU scorer: fresh inputs every call, calls back to back, every output
checked, no aliasing) and ParallelKernelBench's (one call per correctness trial, a timing loop that checks
nothing). A fault only pkb's rules see rejects under pkb's and is a warning under the other's; every other
fault rejects under both. Each case has its honest twin."""
import argparse
import json
import pathlib

import pytest
import torch

from pkb.batch import tally
from pkb.cli._screen_arguments import semantics
from pkb.cli.main import main
from pkbsim.screen.candidate_side import CandidateReport
from pkbsim.screen.functional import ReferenceRun, judge
from pkbsim.screen.pipeline import ScreenOptions, screen
from pkbsim.screen.result import ScreenResult, Semantics, Verdict
from pkbsim.timing.topology import load_topology
from tasks.api import TaskContext
from tasks.registry import get

HERE = pathlib.Path(__file__).parent
NO_EXIT_BARRIER = HERE / "broken_candidates" / "all_reduce__no_exit_barrier.py"
EXIT_BARRIER = HERE / "fixed_candidates" / "all_reduce__exit_barrier.py"
ALIASED = HERE / "broken_candidates" / "all_reduce__aliased_output.py"
REFERENCE = HERE / "broken_candidates" / "all_reduce__reference.py"
PKB, BENCH = Semantics.PKB, Semantics.PARALLELKERNELBENCH

# a one-shot all-reduce that reads its peers' buffers before they have copied their inputs in: a race inside
# one call, which a fresh process with one call (ParallelKernelBench's correctness trial) has too
NO_ENTRY_BARRIER = '''import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_BUF = {}


def solution(x):
    if "b" not in _BUF:
        buf = symm_mem.empty(*x.shape, dtype=x.dtype, device=x.device)
        _BUF["b"] = (buf, symm_mem.rendezvous(buf, dist.group.WORLD.group_name))
    buf, handle = _BUF["b"]
    buf.copy_(x)
    out = torch.zeros_like(x)
    for peer in range(handle.world_size):
        out += handle.get_buffer(peer, list(x.shape), x.dtype)
    handle.barrier(channel=0)
    return out
'''

# keeps its first answer for every later call of the same shape: right on a fresh process's one call, wrong on
# every later call with other inputs (ParallelKernelBench's timing loop feeds identical inputs and checks nothing)
CACHED_ANSWER = '''import torch.distributed as dist

_ANSWER = {}


def solution(x):
    key = tuple(x.shape)
    if key not in _ANSWER:
        out = x.clone()
        dist.all_reduce(out)
        _ANSWER[key] = out
    return _ANSWER[key].clone()
'''
NO_CACHE = '''import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
'''


# wrong wherever a rank's first input element is negative: a fault of the data, which a fresh process shows too
DATA_BUG = '''import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    if float(x.flatten()[0]) < 0:
        out = out + 1
    return out
'''


def run_screen(path, rules: Semantics, world_size: int = 2, seed: int = 3) -> ScreenResult:
    opts = ScreenOptions(world_size, load_topology("hgx-h100"), seed=seed, timeout=120.0, cost=False, semantics=rules)
    return screen(get("all_reduce"), str(path), opts)


def first_elements(seed: int, trial: int, world_size: int = 2) -> list[float]:
    task = get("all_reduce")
    return [float(task.make_inputs(TaskContext(r, world_size, seed, trial, "screen", dict(task.sizes["screen"]),
                                               torch.device("cpu")))[0].flatten()[0]) for r in range(world_size)]


def written(tmp_path, name: str, text: str) -> pathlib.Path:
    f = tmp_path / f"all_reduce__{name}.py"
    f.write_text(text)
    return f


def test_a_race_between_calls_rejects_under_pkb_and_warns_under_parallelkernelbench():
    under_bench = run_screen(NO_EXIT_BARRIER, BENCH)
    assert under_bench.verdicts == {PKB: Verdict.REJECT, BENCH: Verdict.PASS}, under_bench.warnings
    assert under_bench.verdict == Verdict.PASS and not under_bench.reasons and under_bench.semantics == BENCH
    (warning,) = under_bench.warnings[:1]
    assert warning.pkb_only and warning.kind in ("race", "wrong_output")
    assert "between call" in warning.message or "back to back" in warning.message or "no barrier" in warning.message
    under_pkb = run_screen(NO_EXIT_BARRIER, PKB)
    assert under_pkb.verdict == Verdict.REJECT and under_pkb.reasons[0].pkb_only and not under_pkb.warnings
    assert under_pkb.under(BENCH).verdict == Verdict.PASS  # one screen holds both
    for rules in (PKB, BENCH):
        fixed = run_screen(EXIT_BARRIER, rules)
        assert fixed.verdict == Verdict.PASS and not fixed.warnings and not fixed.reasons, fixed.reasons
        assert fixed.verdicts == {PKB: Verdict.PASS, BENCH: Verdict.PASS}


def test_a_race_within_one_call_rejects_under_both(tmp_path):
    res = run_screen(written(tmp_path, "no_entry_barrier", NO_ENTRY_BARRIER), BENCH)
    assert res.verdicts == {PKB: Verdict.REJECT, BENCH: Verdict.REJECT}, res.reasons
    assert res.reasons[0].kind in ("race", "wrong_output") and not res.reasons[0].pkb_only, res.reasons


def test_a_wrong_answer_on_later_calls_only_is_pkbs_fault_alone(tmp_path):
    res = run_screen(written(tmp_path, "cached", CACHED_ANSWER), BENCH)
    assert res.verdicts == {PKB: Verdict.REJECT, BENCH: Verdict.PASS}, res.reasons
    assert res.warnings[0].kind == "wrong_output" and res.warnings[0].message.startswith("call 2"), res.warnings
    assert "right in a fresh process" in res.warnings[0].message
    assert res.under(PKB).reasons[0].kind == "wrong_output"
    honest = run_screen(written(tmp_path, "no_cache", NO_CACHE), BENCH)
    assert honest.verdicts == {PKB: Verdict.PASS, BENCH: Verdict.PASS} and not honest.warnings


def test_a_fresh_check_with_no_answer_leaves_the_benchmarks_verdict_open(tmp_path, monkeypatch):
    """The cached answer again, but the fresh process gives no answer (it crashed, or met a limit of pkb): under
    pkb's rules the later call's wrong output still rejects; under the benchmark's nobody knows whether its
    correctness trial would pass, so that verdict is inconclusive (it was a reject under both before). The twin
    where the fresh process answers is the test above (a pass under the benchmark's rules)."""
    import pkbsim.screen.pipeline as pipeline
    monkeypatch.setattr(pipeline, "_right_when_fresh", lambda *a: None)
    res = run_screen(written(tmp_path, "cached", CACHED_ANSWER), BENCH)
    assert res.verdicts == {PKB: Verdict.REJECT, BENCH: Verdict.INCONCLUSIVE}, (res.reasons, res.warnings)
    assert res.reasons[0].kind == "limit" and "gave no answer" in res.reasons[0].message, res.reasons
    assert res.warnings[0].kind == "wrong_output" and "gave no answer" in res.warnings[0].message
    assert res.under(PKB).reasons[0].kind == "wrong_output"


def test_a_later_call_wrong_on_its_own_inputs_rejects_under_both(tmp_path):
    """The twin of the cached answer: wrong first on call 2, but because of trial 1's data, not of call 1: the
    fresh process on trial 1's inputs is wrong too, so ParallelKernelBench's correctness trial would fail it."""
    seed = next(s for s in range(200) if min(first_elements(s, 0)) >= 0 > min(first_elements(s, 1)))
    res = run_screen(written(tmp_path, "data_bug", DATA_BUG), BENCH, seed=seed)
    assert res.verdicts == {PKB: Verdict.REJECT, BENCH: Verdict.REJECT}, res.warnings
    assert res.reasons[0].message.startswith("call 2") and "fresh process" in res.reasons[0].message
    assert not res.reasons[0].pkb_only


def test_an_output_aliasing_an_input_is_pkbs_fault_alone():
    res = run_screen(ALIASED, BENCH)
    assert res.verdicts == {PKB: Verdict.REJECT, BENCH: Verdict.PASS}, res.reasons
    assert res.warnings[0].kind == "aliased_output"
    ref = run_screen(REFERENCE, BENCH)
    assert ref.verdicts == {PKB: Verdict.PASS, BENCH: Verdict.PASS} and not ref.warnings


def test_the_first_call_is_compared_whatever_the_report_says():
    """A candidate's process that hands back no outputs, or none for the first call beside a race between calls
    it claims, is wrong under every rule set: only later calls may go uncompared."""
    ref = ReferenceRun(outputs=[[[1.0], [1.0]]] * 3, aliased=[[[], []]] * 3, mutated=[[False, False]] * 3,
                       digests=[[None, None]] * 3)
    task = get("all_reduce")
    empty = judge(task, ref, CandidateReport())
    assert empty.reasons and not empty.reasons[0].pkb_only
    from pkbsim.screen.result import Reason
    claim = CandidateReport(outputs=[[None, None], [None, None]], reasons=[Reason("race", "claimed", "", True)])
    cut = judge(task, ref, claim)
    assert cut.reasons[0].kind == "wrong_output" and not cut.reasons[0].pkb_only


def test_the_default_rules_follow_the_benchmark_and_the_counts_show_both():
    assert semantics(argparse.Namespace(semantics=None, parallelkernelbench_root="/pkb")) == "parallelkernelbench"
    assert semantics(argparse.Namespace(semantics=None, parallelkernelbench_root=None)) == "pkb"
    assert semantics(argparse.Namespace(semantics="pkb", parallelkernelbench_root="/pkb")) == "pkb"
    a = ScreenResult("t", "a.py", 2, "x", 0)
    a.warnings = [__import__("pkbsim.screen.result", fromlist=["Reason"]).Reason("race", "r", "", True)]
    b = ScreenResult("t", "b.py", 2, "x", 0)
    rows = [r.settle().under(BENCH) for r in (a, b)]
    assert tally(rows).startswith("2 passed") and "under pkb's: 1 passed, 0 inconclusive, 1 rejected" in tally(rows)
    assert "alike" in tally([rows[1]])


def test_pkb_screen_json_names_the_rules_and_both_verdicts(capsys):
    code = main(["screen", str(NO_EXIT_BARRIER), "--task", "all_reduce", "--world-size", "2", "--no-cost",
                 "--seed", "3", "--semantics", "parallelkernelbench", "--json", "--no-sandbox"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["semantics"] == "parallelkernelbench"
    assert doc["verdicts"] == {"parallelkernelbench": "pass", "pkb": "reject"} and doc["warnings"][0]["pkb_only"]


@pytest.mark.parametrize("rules", ["pkb", "parallelkernelbench"])
def test_pkb_screen_says_which_rules_decided(capsys, rules):
    code = main(["screen", str(NO_EXIT_BARRIER), "--task", "all_reduce", "--world-size", "2", "--no-cost",
                 "--seed", "3", "--semantics", rules, "--no-sandbox"])
    out = capsys.readouterr().out
    other = "parallelkernelbench" if rules == "pkb" else "pkb"
    assert f"under {rules}'s rules; {'pass' if rules == 'pkb' else 'reject'} under {other}'s" in out
    assert code == (1 if rules == "pkb" else 0)


def test_the_leaderboard_counts_a_screen_reject_under_the_rules_that_make_it_one():
    from pkb.report.collect import with_screen_verdicts
    from pkbsim.screen.result import Reason, Stage
    own = ScreenResult("all_reduce", "/tree/a.py", 2, "x", 0)
    own.warnings = [Reason("aliased_output", "output 0 shares memory with an input", "", True)]
    both = ScreenResult("all_reduce", "/tree/b.py", 2, "x", 0).reject(Stage.FUNCTIONAL, [Reason("race", "r", "")])
    rows = [r.settle() for r in (own, both)]
    runs, counts = with_screen_verdicts([], rows, PKB)
    assert counts["tree"].screen_rejected == 2 and len(runs) == 2
    runs, counts = with_screen_verdicts([], rows, BENCH)
    assert counts["tree"].screen_rejected == 1 and [r.candidate for r in runs] == ["/tree/b.py"]
