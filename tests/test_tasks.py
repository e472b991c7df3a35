"""The Task API and every task of the suite, checked by the same validator as `pkb tasks validate`."""
import json
import types

import pytest
import torch

from pkb.cli.main import main
from pkbsim.taskcheck import validate
from tasks.api import Output, TaskContext, WorldSizes, compare
from tasks.registry import TaskError, all_tasks, get, load

TASKS = all_tasks()


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.slug)
def test_task_is_valid(task):
    bad = [c for c in validate(task, full=False) if not c.ok and not c.timed]
    assert not bad, "; ".join(f"{c.name} @{c.world_size}: {c.message}" for c in bad)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.slug)
def test_task_full_size_shape_run(task):
    from pkbsim.taskcheck import check_full_size, validation_sizes
    n = max(validation_sizes(task))
    c = check_full_size(task, n, seed=1)
    assert c.ok, c.message


def test_suite_size_and_categories(capsys):
    assert main(["tasks", "--json"]) == 0
    doc = json.loads(capsys.readouterr()[0])["tasks"]
    assert len(doc) >= 100
    assert {t["category"] for t in doc} == {"collective", "fused", "parallelism", "application", "internode"}
    assert all(t["origin"] for t in doc)
    for slug, sig in [("all_reduce", "solution(x)"), ("all_gather", "solution(x)"), ("reduce_scatter", "solution(x)"),
                      ("all_to_all", "solution(x)"), ("broadcast", "solution(x)")]:
        assert get(slug).signature == sig


@pytest.mark.parametrize("columns", [80, 120])
def test_the_task_list_fits_the_terminal_a_line_a_task(capsys, monkeypatch, columns):
    """It was printed 160 columns wide, every row wrapping on an 80-column terminal; now the origin (and a long
    world-size rule) is cut with an ellipsis, one line a task, and `show`/--json keep the whole text."""
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["tasks"]) == 0
    lines = capsys.readouterr()[0].splitlines()
    assert lines[0].split() == ["id", "slug", "category", "world", "sizes", "origin"]
    assert len(lines) == len(TASKS) + 2 and max(map(len, lines)) <= columns, max(map(len, lines))
    assert any(line.endswith("\u2026") for line in lines)  # something was cut, with an ellipsis
    assert lines[1].split()[:2] == [str(TASKS[0].id), TASKS[0].slug]


def test_world_size_rules():
    assert WorldSizes()(2) and not WorldSizes()(1)
    rule = WorldSizes(min=4, multiple_of=2, power_of_two=True)
    assert [n for n in range(1, 17) if rule(n)] == [4, 8, 16]


def test_context_is_deterministic_per_seed_trial_rank():
    def draw(seed, trial, rank, shared=False):
        return TaskContext(rank, 4, seed, trial, "screen", {}, torch.device("cpu")).randn(8, shared=shared)
    assert torch.equal(draw(1, 0, 0), draw(1, 0, 0))
    assert not torch.equal(draw(1, 0, 0), draw(1, 1, 0))
    assert not torch.equal(draw(1, 0, 0), draw(1, 0, 1))
    assert torch.equal(draw(1, 0, 0, shared=True), draw(1, 0, 3, shared=True))


def test_compare_checks_dtype_shape_tolerance_and_nans():
    ref = torch.linspace(1, 2, 10)
    spec = Output("y", torch.float32)
    assert compare(ref.clone(), ref, spec) is None
    assert "dtype" in compare(ref.double(), ref, spec)
    assert "shape" in compare(ref[:5], ref, spec)
    assert "outside" in compare(ref * (1 + 1e-3), ref, spec)
    assert compare(ref * (1 + 1e-3), ref, Output("y", torch.float32, rtol=1e-2)) is None
    with_nan = ref.clone()
    with_nan[3] = float("nan")
    assert "NaN" in compare(with_nan, ref, spec)
    assert compare(with_nan, with_nan, Output("y", torch.float32, nan="equal")) is None
    assert "differ" in compare(torch.tensor([1, 2]), torch.tensor([1, 3]), Output("i", torch.int64))


def test_registry_rejects_broken_modules():
    mod = types.ModuleType("tasks.fake")
    mod.SLUG, mod.ID, mod.TITLE, mod.CATEGORY, mod.ORIGIN = "fake", 999, "t", "collective", "o"
    mod.WORLD_SIZES, mod.SIZES, mod.OUTPUTS = WorldSizes(), {"screen": {}, "full": {}}, [Output("o", torch.float32)]
    mod.make_inputs = mod.reference = lambda *a: None
    assert load(mod).slug == "fake"
    mod.CATEGORY = "misc"
    with pytest.raises(TaskError, match="CATEGORY"):
        load(mod)
    mod.CATEGORY, mod.SIZES = "collective", {"screen": {}}
    with pytest.raises(TaskError, match="screen"):
        load(mod)
    with pytest.raises(TaskError, match="did you mean all_reduce"):
        get("all_reduse")


def test_validator_catches_a_degenerate_task():
    """A task whose output does not depend on communication must fail validation."""
    mod = types.ModuleType("tasks.degenerate")
    mod.SLUG, mod.ID, mod.TITLE, mod.CATEGORY, mod.ORIGIN = "degenerate", 998, "t", "collective", "o"
    mod.WORLD_SIZES, mod.SIZES = WorldSizes(), {"screen": {"n": 16}, "full": {"n": 16}}
    mod.OUTPUTS = [Output("y", torch.float32, atol=10.0)]
    mod.make_inputs = lambda ctx: (ctx.randn(ctx.size["n"]),)
    mod.reference = lambda x: x * 2
    checks = {c.name: c.ok for c in validate(load(mod), world_sizes=(2,), full=False)}
    assert checks["skipping communication fails"] is False
    assert checks["tolerance consistent with bf16 rounding"] is False  # atol=10 is a tolerance hole
    assert checks["reference runs"] is True


def test_validation_sizes_fall_back_to_the_smallest_supported_world():
    """Inter-node tasks start above 8 ranks: they are validated at their smallest supported world size."""
    from pkbsim.taskcheck import validation_sizes
    assert validation_sizes(get("all_reduce")) == [2, 4, 8]
    assert validation_sizes(get("hierarchical_all_reduce")) == [16]


def test_aliasing_check_takes_sparse_inputs():
    """An output sharing memory with an input is found also through a sparse COO input's values; a sparse input
    (no storage of its own: asking raised, ParallelKernelBench's reference 62 ended inconclusive) is no error."""
    from tasks.api import aliased_outputs

    sparse = torch.eye(4).to_sparse()
    dense = torch.ones(4)
    assert aliased_outputs((dense.clone(), sparse._values()), (sparse, dense)) == [1]
    assert aliased_outputs((dense.clone(),), (sparse, dense)) == []
    assert aliased_outputs((sparse,), (sparse,)) == [0]
