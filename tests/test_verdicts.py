"""Three verdicts: pass; reject (the candidate's fault, with a site in its file); inconclusive (a limit of
pkb, named in one line). Each limit has a case of the candidate's own fault beside it that still rejects,
and the back-to-back calls catch a missing exit barrier that barrier-separated calls hide."""
import dataclasses
import json
import os
import pathlib
import sys

import pytest

from pkb.cli.main import main
from pkb.batch import timeline_name
from pkbsim.screen import cuda_check
from pkb.batch.job import ScreenJob
from pkbsim.screen.pipeline import ScreenOptions, screen
from pkbsim.screen.result import ScreenResult, Verdict
from pkbsim.timing.topology import load_topology
from pkbsim.cuda.toolchain import unavailable
from tasks.registry import get

HERE = pathlib.Path(__file__).parent
ROOT = str(HERE.parent)
NO_EXIT_BARRIER = HERE / "broken_candidates" / "all_reduce__no_exit_barrier.py"
EXIT_BARRIER = HERE / "fixed_candidates" / "all_reduce__exit_barrier.py"


def run_screen(path, world_size=2, task="all_reduce", timeout=120.0):
    task = get(task) if isinstance(task, str) else task
    opts = ScreenOptions(world_size, load_topology("hgx-h100"), seed=5, timeout=timeout, cost=False)
    return screen(task, str(path), opts)


def candidate(tmp_path, body: str) -> pathlib.Path:
    f = tmp_path / "all_reduce__case.py"
    f.write_text("import torch\nimport torch.distributed as dist\n" + body)
    return f


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_back_to_back_calls_catch_a_missing_exit_barrier(world_size):
    bug = run_screen(NO_EXIT_BARRIER, world_size)
    assert (bug.verdict, bug.stage) == (Verdict.REJECT, "functional"), bug.reasons
    # the next call's copy-in races with a peer still reading: caught as the race itself, or as the wrong output
    assert bug.reasons[0].kind in ("race", "wrong_output"), bug.reasons
    assert bug.reasons[0].kind == "race" or "back to back" in bug.reasons[0].message
    assert bug.reasons[0].site.split(":")[0] in (str(NO_EXIT_BARRIER), NO_EXIT_BARRIER.name)  # the candidate's line
    fixed = run_screen(EXIT_BARRIER, world_size)
    assert fixed.verdict == Verdict.PASS and fixed.correct, fixed.reasons


UNSUPPORTED = "def solution(x):\n    dist.recv(x)\n    return x\n"          # recv without src: not simulated
OUT_OF_MEMORY = "def solution(x):\n    return torch.empty(2**50)\n"     # over the worker's memory
OWN_ERROR = "def solution(x):\n    raise ValueError('bad')\n"
OWN_LIMIT = ("class NotSimulated(Exception):\n    pass\n\n"                  # a class of its own never counts
             "def solution(x):\n    raise NotSimulated('dodge')\n")


@pytest.mark.parametrize("body, verdict, says", [
    (UNSUPPORTED, Verdict.INCONCLUSIVE, "not simulated"), (OUT_OF_MEMORY, Verdict.INCONCLUSIVE, "out of memory"),
    (OWN_ERROR, Verdict.REJECT, "bad"), (OWN_LIMIT, Verdict.REJECT, "dodge")],
    ids=["not_simulated", "memory", "own", "own_class"])
def test_pkb_limits_are_inconclusive_and_own_errors_reject(tmp_path, body, verdict, says):
    f = candidate(tmp_path, body)
    res = run_screen(f)
    assert res.verdict == verdict, res.reasons
    assert says in res.reasons[0].message and "\n" not in res.reasons[0].message
    if verdict == Verdict.REJECT:
        assert res.reasons[0].site == f"{f}:{body.count(chr(10)) + 2}"
    assert res.to_json()["verdict"] == verdict.value and isinstance(res.to_json()["verdict"], str)


def test_triton_not_installed_is_inconclusive(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)
    res = run_screen(candidate(tmp_path, "import triton\n\ndef solution(x):\n    return x\n"))
    assert res.verdict == Verdict.INCONCLUSIVE
    assert res.reasons[0].message == "triton not installed: pip install 'pkb[triton]'"


SPIN = "def solution(x):\n    while True:\n        pass\n"
SLOW = ("def solution(x):\n    a = torch.randn(600, 600)\n    for _ in range(100000):\n        a = torch.tanh(a @ a)\n"
        "    return x\n")


@pytest.mark.parametrize("body, verdict", [(SPIN, Verdict.REJECT), (SLOW, Verdict.INCONCLUSIVE)],
                         ids=["own_loop", "slow_simulation"])
def test_timeout_rejects_a_loop_of_the_candidate_but_not_a_slow_simulation(tmp_path, body, verdict):
    f = candidate(tmp_path, body)
    res = run_screen(f, timeout=4)
    assert res.verdict == verdict, res.reasons
    if verdict == Verdict.REJECT:
        assert res.reasons[0].kind == "timeout" and res.reasons[0].site.startswith(str(f))
    else:
        assert res.reasons[0].kind == "time_limit"


def test_a_reference_that_fails_on_the_simulator_is_inconclusive():
    def broken(x):
        raise RuntimeError("the reference is broken")
    task = dataclasses.replace(get("all_reduce"), reference=broken)
    res = run_screen(HERE / "broken_candidates" / "all_reduce__reference.py", task=task)
    assert (res.verdict, res.reasons[0].kind) == (Verdict.INCONCLUSIVE, "reference")


KITTENS = '#include "kittens.cuh"\n__global__ void k(float* x) { x[0] = 1; }\n'


def test_a_torch_header_that_no_torch_has_rejects_but_a_cuda_only_one_is_a_limit():
    """<ATen/core/Dispatch.h> (a misremembered <ATen/Dispatch.h>) fails on the GPU machine too; ATen/cuda/ and
    c10/cuda/ headers exist only in torch's CUDA builds, so their absence here is pkb's limit."""
    from pkbsim.cuda.toolchain import missing_header
    log = "x.cu:12:10: fatal error: {}: No such file or directory\n"
    assert missing_header(log.format("ATen/core/Dispatch.h")) is None
    assert missing_header(log.format("ATen/Dispatch.h")) is not None      # here (so missing from an include path)
    assert missing_header(log.format("ATen/cuda/CUDAContextLight.h")) is not None
    assert missing_header(log.format("c10/cuda/CUDAStream.h")) is not None
    assert missing_header(log.format("kittens.cuh")) == "missing header kittens.cuh (not installed here)"


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_a_missing_third_party_header_is_inconclusive_and_a_typo_rejects(tmp_path, monkeypatch):
    monkeypatch.delenv("PKB_THUNDERKITTENS_ROOT", raising=False)
    assert cuda_check.compile_check(KITTENS).message == "missing header kittens.cuh (not installed here)"
    f = candidate(tmp_path, f"from torch.utils.cpp_extension import load_inline\nSRC = r'''{KITTENS}'''\n"
                            "ext = load_inline('kt', cpp_sources='', cuda_sources=SRC)\n\n"
                            "def solution(x):\n    return x\n")
    res = run_screen(f)
    why = res.reasons[0].message
    assert res.verdict == Verdict.INCONCLUSIVE and "ThunderKittens not found" in why and "PKB_THUNDERKITTENS_ROOT" in why
    f.write_text(f.read_text().replace('#include "kittens.cuh"', "").replace("x[0] = 1", "x[0] = y"))
    res = run_screen(f)
    assert (res.verdict, res.stage, res.reasons[0].kind) == (Verdict.REJECT, "static", "compile_error")


def test_a_candidate_process_killed_by_a_signal_is_inconclusive_and_the_batch_goes_on(tmp_path, capsys):
    crash = tmp_path / "all_reduce__segv.py"
    crash.write_text("import ctypes\nctypes.string_at(0)\n\ndef solution(x):\n    return x\n")
    ok = tmp_path / "all_reduce__ok.py"
    ok.write_text((HERE / "broken_candidates" / "all_reduce__reference.py").read_text())
    assert main(["run", str(crash), str(ok), "--world-size", "2", "--db", str(tmp_path / "r.sqlite"), "--json"]) == 0
    rows = {pathlib.Path(r["candidate"]).name: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert (rows[crash.name]["verdict"], rows[crash.name]["reasons"][0]["kind"]) == ("inconclusive", "worker_crash")
    assert "SIGSEGV" in rows[crash.name]["reasons"][0]["message"] and rows[ok.name]["verdict"] == "pass"
    # where it crashed: the innermost frame (ctypes) in the message, the candidate's own line as the site
    assert "in string_at at" in rows[crash.name]["reasons"][0]["message"]
    assert rows[crash.name]["reasons"][0]["site"].endswith(f"{crash.name}:2")
    assert main(["report", "--db", str(tmp_path / "r.sqlite")]) == 0
    assert "1 passed, 1 inconclusive" in capsys.readouterr().out


def test_a_screen_result_is_json_only_at_its_boundaries():
    from pkbsim.screen.result import EndedBy, Prediction, Reason, ReasonKind, Stage
    from pkb.batch.worker import inconclusive, rejected
    from pkbsim.world.findings import Finding

    res = ScreenResult("all_reduce", "/c/all_reduce.py", 2, "hgx-h100", 1, checked=[Stage.STATIC],
                       seconds={Stage.STATIC: 0.1, "build": 0.0, Stage.FUNCTIONAL: 1.5}).reject(
        Stage.FUNCTIONAL, [Reason(ReasonKind.WRONG_OUTPUT, "call 1: wrong", "/c/all_reduce.py:3"), Reason("deadlock", "d")])
    res.findings = [Finding("deadlock", "d", [0, 1], ["all_reduce.py:3"], ["rank 0 waits"])]
    res.predicted = Prediction(10.0, 20.0, 0.5, "link-bound", False, notes=["n"], shares={"link": 1.0})
    doc = res.to_json()
    assert json.loads(json.dumps(doc)) == doc and [type(r["kind"]) for r in doc["reasons"]] == [str, str]
    assert doc["verdict"] == "reject" and type(doc["verdict"]) is str and doc["findings"][0]["ranks"] == [0, 1]
    assert (doc["stage"], doc["checked"], doc["seconds"]) == ("functional", ["static"], {"static": 0.1, "build": 0.0,
                                                                                        "functional": 1.5})
    assert {type(x) for x in [doc["stage"], *doc["checked"], *doc["seconds"]]} == {str}  # plain strings in JSON
    back = ScreenResult.from_json(doc)
    assert back == res and back.reasons[0].kind is ReasonKind.WRONG_OUTPUT and back.reasons[1].kind == "deadlock"
    assert back.stage is Stage.FUNCTIONAL and back.checked == [Stage.STATIC] and back.checked[0] is Stage.STATIC
    assert ScreenResult.from_json(dict(doc, stage="later")).stage == "later"  # another version's stage: kept as is
    for ended in ("sandbox", "time_limit", "memory_limit", "worker_crash", "pkb_error"):  # as stored rows hold them
        assert ScreenResult.from_json(dict(doc, stage=ended)).stage is EndedBy(ended)
    assert isinstance(back.findings[0], Finding) and back.predicted.shares == {"link": 1.0}
    # a worker's own answers (a limit, a broken sandbox cap) are ScreenResults too, with the JSON they always had
    job = ScreenJob("all_reduce", "/c/x.py", 2, "hgx-h100", 1)
    late = inconclusive(job, ReasonKind.TIME_LIMIT, "too slow").to_json()
    assert (late["verdict"], late["stage"], late["reasons"]) == (
        "inconclusive", "time_limit", [{"kind": "time_limit", "message": "too slow", "site": "", "pkb_only": False}])
    assert late["verdicts"] == {"pkb": "inconclusive", "parallelkernelbench": "inconclusive"}
    assert rejected(job, ReasonKind.RESOURCE_LIMIT, "cap").to_json()["stage"] == "sandbox"
    assert inconclusive(job, ReasonKind.WORKER_CRASH, "gone").stage is EndedBy.WORKER_CRASH


def test_timelines_of_same_named_candidates_in_two_folders_differ(tmp_path):
    assert timeline_name("all_reduce", "/a/all_reduce.py") != timeline_name("all_reduce", "/b/all_reduce.py")


def test_inconclusive_candidates_are_scored_on_hardware_like_passes(monkeypatch):
    import hwbackend.score
    from hwbackend.result import ScoreResult
    from pkb import batch

    scored = []
    monkeypatch.setattr(hwbackend.score, "score",
                        lambda request, *a: scored.append(request.candidate) or ScoreResult("r", request.task))
    rows = [ScreenResult("all_reduce", v.value, 2, "hgx-h100", 0, verdict=v) for v in Verdict]
    batch.score(rows, db=":memory:", correctness_only=False)
    assert scored == ["pass", "inconclusive"]


def test_the_interpreters_instruction_budget_is_a_limit_but_a_trap_is_the_kernels():
    from pkbsim.ptx.errors import InstructionBudget, KernelHang
    from pkbsim.screen.limits import limit_of

    budget = InstructionBudget("kernel k ran past 1000 warp-instructions (an endless loop or a spin that never "
                               "sees its flag?) near k.cu:3")
    assert isinstance(budget, KernelHang)  # the interpreter's callers still see a hang
    assert limit_of(budget).startswith("PTX interpreter limit")
    assert limit_of(KernelHang("kernel executed trap (assert or __trap) at k.cu:3")) is None
    # a hang that merely says so in its text is still the kernel's (the class decides, not the words)
    assert limit_of(KernelHang("kernel k ran past 1000 warp-instructions near k.cu:3")) is None


def test_whose_fault_is_decided_by_the_error_hierarchy():
    import pickle

    from pkbsim.cuda.build import ExtensionBuildError, MissingHeader
    from pkbsim.errors import CandidateFault, CannotSimulate, CompileError, NotSimulated, SimulatorLimit
    from pkbsim.ptx import errors as ptx_errors
    from pkbsim.screen.candidate import CandidateError
    from pkbsim.screen.limits import limit_of
    from pkbsim.screen.parallelkernelbench_budgets import PkbLimitExceeded
    from pkbsim.standins import dtensor_ops

    # one NotSimulated and one CompileError, whoever raises them
    assert ptx_errors.NotSimulated is NotSimulated and ptx_errors.CompileError is CompileError
    assert issubclass(dtensor_ops.MaskNotSimulated, NotSimulated)
    # pkb's limits, each named in one line
    assert limit_of(NotSimulated("reduce op PREMUL_SUM")) == "not simulated: reduce op PREMUL_SUM"
    assert limit_of(NotSimulated("wgmma", "k.cu:3")) == "not simulated: wgmma at k.cu:3"
    assert limit_of(PkbLimitExceeded("t", "memory", "too big")) == "PkbLimitExceeded: too big"
    assert limit_of(MissingHeader("cutlass/cutlass.h")) == "MissingHeader: cutlass/cutlass.h"
    assert limit_of(CannotSimulate("no nvcc")) == "CannotSimulate: no nvcc"
    # the candidate's faults are no limits, and neither is an error whose class merely has a limit's name
    for fault in (CandidateError("signature", "bad"), ExtensionBuildError("k.py:3: nvcc: error: x", "k.py:3")):
        assert isinstance(fault, CandidateFault) and not isinstance(fault, SimulatorLimit) and limit_of(fault) is None
    assert limit_of(type("RateLimitError", (Exception,), {})("x")) is None
    # it crosses a process boundary whole
    back = pickle.loads(pickle.dumps(NotSimulated("wgmma", "k.cu:3")))
    assert (type(back), str(back), back.where) == (NotSimulated, "not simulated: wgmma at k.cu:3", "k.cu:3")


def test_each_error_class_is_defined_once():
    import re

    defined = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "pkbsim")):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(folder, f)) as fh:
                    for name in re.findall(r"^class (\w+)\(", fh.read(), re.M):
                        defined.setdefault(name, []).append(os.path.join(folder, f))
    for name in ("NotSimulated", "CompileError", "CannotSimulate", "SimulatorLimit", "CandidateFault"):
        assert len(defined.get(name, [])) == 1, (name, defined.get(name))


def test_a_wrong_output_names_the_trial_and_a_decorated_solutions_own_line(tmp_path):
    wrong = tmp_path / "decorated.py"
    wrong.write_text("import torch\n\n\n@torch.no_grad()\ndef solution(x):\n    return x.clone()\n")
    res = run_screen(wrong)
    assert (res.verdict, res.reasons[0].kind) == (Verdict.REJECT, "wrong_output")
    assert res.reasons[0].message.startswith("call 1 (warm-up, trial 0's inputs)")
    assert res.reasons[0].site == f"{wrong}:4"  # the decorated def (from its decorator line), not torch's wrapper


def test_a_missing_nvcc_is_a_limit_of_pkb_in_the_compiler_and_in_pkb_check(monkeypatch, run_program):
    """No nvcc here is pkb's limit, never the program's fault: the PTX compiler raised a CompileError (the
    candidate's fault in the hierarchy) and `pkb check` called a refused `load_inline` the program's error.
    The twin: a real error the program raises stays an error."""
    from pkbsim.cuda import install
    from pkbsim.errors import CannotSimulate, SimulatorLimit
    from pkbsim.ptx import compile as ptx_compile

    monkeypatch.setattr(ptx_compile, "find_nvcc", lambda: None)
    with pytest.raises(CannotSimulate) as err:
        ptx_compile.compile_to_ptx("__global__ void k() {}", "k.cu")
    assert isinstance(err.value, SimulatorLimit) and "PKB_NVCC" in str(err.value)

    monkeypatch.setattr(install, "unavailable", lambda: "no nvcc here (test)")
    body = """
        from torch.utils.cpp_extension import load_inline
        load_inline("k", "", cuda_sources="__global__ void k() {}")
    """
    res = run_program(body)
    assert [f.kind for f in res.findings] == ["not_simulated"], res.findings
    assert "no nvcc here (test)" in res.findings[0].message
    twin = run_program("""
        raise RuntimeError("the program's own error")
    """)
    assert {f.kind for f in twin.findings} == {"error"}, twin.findings


def test_only_a_fatal_signal_reads_the_last_crash_dump(tmp_path):
    import signal

    from pkbsim.screen.isolation import FAULT_LOG, _frames
    (tmp_path / FAULT_LOG).write_text(
        'Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n'
        '  File "/old.py", line 3 in gone\n\n'
        'Fatal Python error: Segmentation fault\n\nCurrent thread 0x2 (most recent call first):\n'
        '  File "/lib.py", line ??? in native\n  File "/cand.py", line 7 in solution\n')
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert _frames(folder, signal.SIGSEGV) == (("/lib.py", 0, "native"), ("/cand.py", 7, "solution"))
        assert _frames(folder, signal.SIGKILL) == ()   # a kill after some forked process's crash: not ours
    finally:
        os.close(folder)
