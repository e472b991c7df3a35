"""The sizes stage (pkbsim/screen/sizes.py): a ParallelKernelBench problem's candidate at larger sizes than the
screen's 64 x 64, up to the benchmark's 1024 x 1024, within a budget. Each broken program passes the
functional stage (its fault needs a larger size) and is rejected here with the reason named; its fixed twin
passes; out of budget, the stage is skipped with a note and the broken one passes (a limit of pkb, never a
reject)."""
import json
import pathlib
import textwrap

import pytest
from pkb_checkout import write_checkout

from pkb.cli.main import main
from pkbsim.screen.parallelkernelbench import register_parallelkernelbench_tasks
from pkbsim.screen.pipeline import ScreenOptions, screen
from pkbsim.screen.result import ReasonKind, Semantics, Stage, Verdict
from pkbsim.screen.sizes import ladder
from pkbsim.timing.topology import load_topology
from tasks.parallelkernelbench.naming import DEFAULT_DTYPE, Checkout
from tasks.registry import get

BUILDER = """
import torch


def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, device=None):
    M, N = base_shape
    torch.manual_seed(3 + 1000 * problem_id + 10 * trial + rank)  # problem 2: no rounding flip in the screen's trials
    if problem_id == 1:
        return (torch.randn((M, 64), dtype=dtype, device=device), torch.randn((64, N), dtype=dtype, device=device))
    if problem_id == 3:  # a layernorm's gradient: rows normalised by their length, so values scale with N
        x = torch.randn((M, N), dtype=dtype, device=device)
        return (x / (x.norm(dim=-1, keepdim=True) + 1e-5), torch.randn((M, N), dtype=dtype, device=device))
    if problem_id in (6, 9):  # a fixed size, whatever the base shape
        return (torch.randn((4096,), dtype=dtype, device=device),)
    return (torch.randn((M * N,), dtype=dtype, device=device),)
"""

QUANT_SUM = """
    def solution(x):
        xb = x.float().view(-1, 64)
        s = xb.abs().amax(1, keepdim=True) / 127
        y = (torch.round(xb / s).clamp(-127, 127) * s).view(-1)
        dist.all_reduce(y)
        return y.to(x.dtype)
    """
REFERENCES = {
    # every rank's product, all-gathered along the columns
    "1_matmul_gather": """
        def solution(a, b):
            c = a @ b
            parts = [torch.empty_like(c) for _ in range(dist.get_world_size())]
            dist.all_gather(parts, c)
            return torch.cat(parts, dim=1)
        """,
    # the gradient of a layernorm's gain: products rounded to bf16, then summed over the rows
    "3_norm_grad": """
        def solution(x, dy):
            g = (dy * x).sum(0)
            dist.all_reduce(g)
            return g
        """,
    # int8 quantisation in blocks of 64 by each block's largest magnitude, dequantised, summed over the ranks
    "2_block_quant_sum": QUANT_SUM,
    # the same on 4096 elements at any size (the seeds put the reciprocal's first flip in trial 3 for problem 6,
    # trial 6 for problem 9: none in the screen's trials 0-2)
    "6_fixed_quant_sum": QUANT_SUM,
    "9_fixed_quant_sum": QUANT_SUM,
}

# chunks the product by 256 rows only when M > 512, and writes every chunk at row 0 (the chunk's start forgotten)
CHUNKED_OFFSET_BUG = """
def solution(a, b):
    m = a.shape[0]
    c = torch.empty((m, b.shape[1]), dtype=a.dtype, device=a.device)
    step = 256 if m > 512 else m
    for start in range(0, m, step):
        rows = min(step, m - start)
        c[0:rows] = a[start:start + rows] @ b
    parts = [torch.empty_like(c) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, c)
    return torch.cat(parts, dim=1)
"""
CHUNKED_FIXED = CHUNKED_OFFSET_BUG.replace("c[0:rows]", "c[start:start + rows]")

# multiplies by the rounded (float32) reciprocal of the scale where the reference divides: a value sitting on a
# .5 boundary of round() moves to the next level, a few elements in 10^5 (none of the screen's 4096)
RECIPROCAL = """
def solution(x):
    xb = x.float().view(-1, 64)
    s = xb.abs().amax(1, keepdim=True) / 127
    inv = 1.0 / s
    y = (torch.round(xb * inv).clamp(-127, 127) * s).view(-1)
    dist.all_reduce(y)
    return y.to(x.dtype)
"""
DIVIDES = RECIPROCAL.replace("xb * inv", "xb / s")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = write_checkout(tmp_path_factory.mktemp("pkb_sizes"), BUILDER, REFERENCES)
    register_parallelkernelbench_tasks(str(root))
    return root


def run(checkout, tmp_path, stem: str, body: str, budget: float | None = None, world_size: int = 2):
    path = tmp_path / f"{stem}_torch.py"
    path.write_text("import torch\nimport torch.distributed as dist\n" + textwrap.dedent(body))
    extra = {} if budget is None else {"sizes_budget": budget}
    opts = ScreenOptions(world_size, load_topology("hgx-h100"), seed=3, timeout=120.0, cost=False,
                         checkout=Checkout(str(checkout), DEFAULT_DTYPE), semantics=Semantics.PARALLELKERNELBENCH, **extra)
    return screen(get(f"pkb{stem}"), str(path), opts)


def test_the_sizes_cross_each_side_at_full_size_then_half_then_full(checkout):
    assert ladder(get("pkb1_matmul_gather")) == [[1024, 64], [64, 1024], [512, 512], [1024, 1024]]


def test_a_chunk_offset_bug_past_512_rows_is_a_wrong_output_at_size(checkout, tmp_path):
    res = run(checkout, tmp_path, "1_matmul_gather", CHUNKED_OFFSET_BUG)
    assert res.verdict is Verdict.REJECT and res.stage == Stage.SIZES, res.reasons
    assert Stage.FUNCTIONAL in res.checked   # 64 x 64 never chunks
    reason = res.reasons[0]
    assert reason.kind == ReasonKind.WRONG_AT_SIZE and "size 1024 x 64" in reason.message, reason
    assert res.verdicts == {Semantics.PKB: Verdict.REJECT, Semantics.PARALLELKERNELBENCH: Verdict.REJECT}
    assert "1_matmul_gather_torch.py:" in reason.site, reason.site


def test_its_twin_with_the_chunk_offset_passes_at_every_size(checkout, tmp_path):
    res = run(checkout, tmp_path, "1_matmul_gather", CHUNKED_FIXED)
    assert res.verdict is Verdict.PASS and Stage.SIZES in res.checked, (res.reasons, res.notes)
    assert "size 1024 x 1024" in res.notes[0], res.notes


def test_a_rounded_reciprocal_is_a_numerics_reject_naming_output_count_and_worst_error(checkout, tmp_path):
    res = run(checkout, tmp_path, "2_block_quant_sum", RECIPROCAL, world_size=1)
    assert res.verdict is Verdict.REJECT and res.stage == Stage.SIZES, res.reasons
    reason = res.reasons[0]
    assert reason.kind == ReasonKind.NUMERICS, reason
    assert "output_0" in reason.message and "elements outside rtol=0.01" in reason.message, reason.message
    assert "worst error" in reason.message, reason.message
    assert not reason.pkb_only


def test_its_twin_that_divides_passes(checkout, tmp_path):
    res = run(checkout, tmp_path, "2_block_quant_sum", DIVIDES, world_size=1)
    assert res.verdict is Verdict.PASS and Stage.SIZES in res.checked, (res.reasons, res.notes)


def test_out_of_budget_the_stage_is_skipped_with_a_note_not_a_reject(checkout, tmp_path):
    res = run(checkout, tmp_path, "1_matmul_gather", CHUNKED_OFFSET_BUG, budget=1e-3)
    assert res.verdict is Verdict.PASS, res.reasons
    assert Stage.SIZES not in res.checked
    assert any("beyond the stage's budget" in n for n in res.notes), res.notes


def test_the_suites_own_tasks_have_no_sizes_stage():
    here = pathlib.Path(__file__).parent
    opts = ScreenOptions(2, load_topology("hgx-h100"), seed=3, cost=False)
    res = screen(get("all_reduce"), str(here / "broken_candidates" / "all_reduce__reference.py"), opts)
    assert res.verdict is Verdict.PASS and Stage.SIZES not in res.checked and "sizes" not in res.seconds


def test_inputs_that_do_not_grow_get_the_benchmarks_other_trials_and_a_flip_there_rejects_under_both(checkout, tmp_path):
    res = run(checkout, tmp_path, "6_fixed_quant_sum", RECIPROCAL, budget=10.0, world_size=1)
    assert res.verdict is Verdict.REJECT and res.stage == Stage.SIZES, (res.reasons, res.notes)
    assert res.reasons[0].kind == ReasonKind.NUMERICS and "trial 3" in res.reasons[0].message, res.reasons
    assert res.verdicts == {Semantics.PKB: Verdict.REJECT, Semantics.PARALLELKERNELBENCH: Verdict.REJECT}


def test_a_flip_only_in_a_draw_beyond_the_benchmarks_trials_rejects_under_pkbs_rules_alone(checkout, tmp_path):
    res = run(checkout, tmp_path, "9_fixed_quant_sum", RECIPROCAL, budget=10.0, world_size=1)
    assert res.verdicts == {Semantics.PKB: Verdict.REJECT, Semantics.PARALLELKERNELBENCH: Verdict.PASS}, res.notes
    assert [w.kind for w in res.warnings] == [ReasonKind.NUMERICS] and "trial 6" in res.warnings[0].message


def test_their_twin_that_divides_passes_every_draw(checkout, tmp_path):
    res = run(checkout, tmp_path, "9_fixed_quant_sum", DIVIDES, budget=10.0, world_size=1)
    assert res.verdicts == {Semantics.PKB: Verdict.PASS, Semantics.PARALLELKERNELBENCH: Verdict.PASS}, res.warnings
    assert "more draws (trials 3-" in res.notes[0], res.notes


@pytest.mark.parametrize("budget, verdict", [(None, "reject"), ("0", "pass")])
def test_pkb_run_hands_its_sizes_budget_to_each_screen(checkout, tmp_path, capsys, budget, verdict):
    """The chunk-offset bug through `pkb run`: the default budget finds it at size; `--sizes-budget 0` (no
    stage) passes it, as `pkb screen --sizes-budget 0` would."""
    path = tmp_path / "1_matmul_gather_torch.py"
    path.write_text("import torch\nimport torch.distributed as dist\n" + CHUNKED_OFFSET_BUG)
    rc = main(["run", str(path), "--pkb-root", str(checkout), "--world-size", "2", "--no-cost", "--seed", "3",
               "--workers", "1", "--db", str(tmp_path / "results.db"), "--json", "--no-sandbox",
               *([] if budget is None else ["--sizes-budget", budget])])
    rows = json.loads(capsys.readouterr().out)["results"]
    assert rc == 0 and [r["verdict"] for r in rows] == [verdict], rows


# the same gradient with products kept in float32 (more exact than the reference): at 1024 x 64 one of 64 sums
# lands 1.3x the tolerance away (rows of length 64 give values 4x the full size's), at 1024 x 1024 none does
FLOAT_PRODUCTS = """
def solution(x, dy):
    g = (dy.float() * x.float()).sum(0).to(x.dtype)
    dist.all_reduce(g)
    return g
"""
# a real fault at that size alone: one sum off by 1.0 when the rows pass 512
OFF_PAST_512 = FLOAT_PRODUCTS.replace("    dist.all_reduce(g)", "    if x.shape[0] > 512:\n        g[0] += 1.0\n    dist.all_reduce(g)")


def test_rounding_alone_at_a_size_the_benchmark_does_not_run_is_a_note_not_a_reject(checkout, tmp_path):
    res = run(checkout, tmp_path, "3_norm_grad", FLOAT_PRODUCTS, world_size=1)
    assert res.verdict is Verdict.PASS and Stage.SIZES in res.checked, (res.reasons, res.notes)
    assert any("size 1024 x 64" in n and "a size the benchmark does not run" in n for n in res.notes), res.notes


def test_its_twin_off_by_far_more_than_rounding_at_that_size_is_rejected(checkout, tmp_path):
    res = run(checkout, tmp_path, "3_norm_grad", OFF_PAST_512, world_size=1)
    assert res.verdict is Verdict.REJECT and res.stage == Stage.SIZES, (res.reasons, res.notes)
    assert res.reasons[0].kind == ReasonKind.WRONG_AT_SIZE and "size 1024 x 64" in res.reasons[0].message


def test_rounding_only_means_finite_errors_within_the_near_tolerance_bound():
    from pkbsim.screen.sizes import NEAR_TOLERANCE, _rounding_only
    near = {"finite": True, "error": 0.02, "expected": 0.8}  # tolerance 0.018: 1.1x
    assert _rounding_only([near])
    assert not _rounding_only([{**near, "error": 0.02 * NEAR_TOLERANCE * 2}])
    assert not _rounding_only([{**near, "finite": False}])
    assert not _rounding_only([])


def _watched(monkeypatch, ended: bool) -> list:
    """The order of the screen's waits for a candidate's process and of the reference's runs at a size
    (`sizes.run_calls`), with every candidate's process seen as still running (ended=False) or as ended."""
    from pkbsim.screen import isolation, sizes

    events = []
    real_start, real_result, real_run = isolation.Zygote.start, isolation.Child.result, sizes.run_calls

    def start(self, job):
        child = real_start(self, job)
        child.ended = lambda: ended
        return child

    def result(self, timeout):
        events.append("wait")
        return real_result(self, timeout)

    def run_calls(task, calls, *args, **kwargs):
        events.extend((c.size["m"], c.size["n"]) for c in calls)
        return real_run(task, calls, *args, **kwargs)
    monkeypatch.setattr(isolation.Zygote, "start", start)
    monkeypatch.setattr(isolation.Child, "result", result)
    monkeypatch.setattr(sizes, "run_calls", run_calls)
    return events


@pytest.mark.parametrize("body, verdict", [(CHUNKED_OFFSET_BUG, Verdict.REJECT), (CHUNKED_FIXED, Verdict.PASS)])
def test_the_reference_runs_its_sizes_while_the_candidates_process_runs_them(checkout, tmp_path, monkeypatch,
                                                                            body, verdict):
    """Before the screen waits for the sizes stage's process (the second wait), the reference has run at every
    size of the ladder; the verdict and its reason are those of the tests above (the bug is found at 1024 x 64,
    where the candidate's process stops: the reference's later sizes are not needed)."""
    events = _watched(monkeypatch, ended=False)
    res = run(checkout, tmp_path, "1_matmul_gather", body)
    assert events[:events.index("wait", 1)] == ["wait", (1024, 64), (64, 1024), (512, 512), (1024, 1024)], events
    assert res.verdict is verdict, (res.reasons, res.notes)
    if verdict is Verdict.REJECT:
        assert res.reasons[0].kind == ReasonKind.WRONG_AT_SIZE and "size 1024 x 64" in res.reasons[0].message
    else:
        assert Stage.SIZES in res.checked and "size 1024 x 1024" in res.notes[0], res.notes


def test_once_the_candidates_process_has_ended_the_reference_runs_only_what_it_ran(checkout, tmp_path, monkeypatch):
    """Its twin: the process already ended, nothing is run ahead, and the reference runs after the wait, at the
    sizes the candidate ran, in one world."""
    events = _watched(monkeypatch, ended=True)
    res = run(checkout, tmp_path, "1_matmul_gather", CHUNKED_FIXED)
    assert events == ["wait", "wait", (1024, 64), (64, 1024), (512, 512), (1024, 1024)], events
    assert res.verdict is Verdict.PASS and Stage.SIZES in res.checked, (res.reasons, res.notes)
