"""`pkb screen` on inline-CUDA candidates: compile errors with the candidate's line, deadlocks with the
CUDA line, wrong outputs, a full-size cost prediction from what the kernels do, and "not simulated" when
nvcc is missing. The built candidate (tests/cuda_candidates/one_shot_all_reduce.py) is shared: its bug
is chosen at call time by PKB_CANDIDATE_BUG."""
import json
import os
import pathlib

import pytest
import torch
from conftest import HERE

from pkbsim.cuda import toolchain
from pkbsim.cuda.build import _build_error
from pkbsim.cuda.toolchain import unavailable
from pkbsim.screen import cuda_check
from pkbsim.screen.pipeline import ScreenOptions, screen
from pkbsim.timing.topology import load_topology
from tasks.registry import get

CANDIDATE = os.path.join(HERE, "cuda_candidates", "one_shot_all_reduce.py")
COPY = os.path.join(HERE, "broken_candidates", "all_reduce__inline_cuda.py")
needs_nvcc = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


def run_screen(path, world_size=4, cost=False):
    return screen(get("all_reduce"), path, ScreenOptions(world_size, load_topology("hgx-h100"), seed=3, cost=cost))


def line_of(path: str, text: str) -> int:
    return next(i for i, ln in enumerate(pathlib.Path(path).read_text().splitlines(), 1) if text in ln)


@pytest.mark.slow
@needs_nvcc
def test_correct_candidate_is_predicted_at_full_size_from_its_peer_bytes(monkeypatch):
    """Correct, and predicted at the task's full size by scaling its screen-size kernels (issue 19): a one-shot
    all-reduce pulls 3 x 256 MiB over NVLink per rank where NCCL's ring moves 384 MiB, so it is slower, and
    link-bound (before: 'uncertain', timed at screen size, where it looked faster)."""
    monkeypatch.delenv("PKB_CANDIDATE_BUG", raising=False)
    res = run_screen(CANDIDATE, cost=True)
    assert res.correct and res.compile["pkb_candidate_one_shot"]["status"] == "ok"
    p = res.predicted
    assert not p.uncertain and p.bottleneck == "link-bound" and p.speedup < 0.8
    assert (res.verdict, res.stage, res.reasons[0].kind) == ("reject", "cost", "slower")
    assert any("inline-CUDA kernels" in n and "scaled to full size" in n for n in p.notes)
    json.dumps(res.to_json())  # `pkb screen --json`: kernel byte counts must be plain ints


@pytest.mark.slow
@needs_nvcc
def test_wrong_flag_value_is_rejected_with_the_cuda_line(monkeypatch):
    monkeypatch.setenv("PKB_CANDIDATE_BUG", "wrong_flag")
    res = run_screen(CANDIDATE)
    assert (res.verdict, res.stage) == ("reject", "functional"), res.reasons
    reason = res.reasons[0]
    assert reason.kind in ("protocol", "deadlock")
    assert reason.site == f"one_shot_all_reduce.py:{line_of(CANDIDATE, 'while (!in.compare_exchange_strong')}"


@pytest.mark.slow
@needs_nvcc
def test_leaving_a_peer_out_is_a_wrong_output(monkeypatch):
    monkeypatch.setenv("PKB_CANDIDATE_BUG", "skip_peer")
    res = run_screen(CANDIDATE)
    assert (res.verdict, res.stage) == ("reject", "functional")
    assert res.reasons[0].kind == "wrong_output"


@needs_nvcc
def test_device_compile_error_is_reported_with_the_candidate_line(tmp_path):
    src = pathlib.Path(COPY).read_text().replace("if (i < n) out[i] = x[i];", "if (i < n) out[i] = x[i]")
    path = tmp_path / "all_reduce__missing_semicolon.py"
    path.write_text(src)
    res = run_screen(str(path))
    assert (res.verdict, res.stage) == ("reject", "static")
    reason = next(r for r in res.reasons if r.kind == "compile_error")
    assert f"all_reduce__missing_semicolon.py:{line_of(str(path), 'out[i] = x[i]') + 1}" in reason.message


def test_host_compile_error_names_the_candidate_line():
    log = '/tmp/x/cand.py(31): error: identifier "outt" is undefined\n1 error detected'
    err = _build_error(log, "/tmp/x/cand.py", "nvcc")
    assert str(err) == 'cand.py:31: nvcc: error: identifier "outt" is undefined' and err.site == "cand.py:31"


def test_without_nvcc_the_candidate_is_not_simulated(monkeypatch):
    monkeypatch.setattr(cuda_check, "find_nvcc", lambda: None)
    monkeypatch.setattr(toolchain, "find_nvcc", lambda: None)
    res = run_screen(COPY)
    assert res.verdict == "inconclusive" and res.correct is None
    why = [r.message for r in res.reasons if r.kind == "not_simulated"]
    assert why and "PKB_NVCC" in why[0]


def test_under_a_cuda_build_of_torch_the_candidate_is_simulated(monkeypatch):
    """The twin (issue 40): a CUDA build of torch in the screening process no longer makes inline CUDA pkb's limit
    (it was 'inconclusive: simulated against a CPU build of torch'); the stand-ins win over its CUDA libraries
    (tests/test_cuda_standin_binding.py; the real build: benchmarks/cuda_torch_check.sh)."""
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    res = run_screen(COPY)
    assert res.verdict == "pass" and res.correct is True
