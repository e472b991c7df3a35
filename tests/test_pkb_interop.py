"""The ParallelKernelBench adapter runs a problem as PKB's harness does: inputs in PKB's dtype, outputs
compared as PKB compares them (None, dicts, sizes), one reference module per rank, uneven all_gather
lists, block sizes, pkb's own limits, and solution files paired by name as well as number. Each problem
lives in a small PKB-shaped checkout written here."""
import json
import pathlib
import textwrap
import warnings

import pytest
from pkb_checkout import write_checkout

from pkb.cli.main import main

BUILDER = """
import torch
import torch.distributed as dist

BUILT = []  # (problem, rank, trial) of every build


def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, device=None):
    BUILT.append((problem_id, rank, trial))
    torch.manual_seed(42 + problem_id * 1000 + rank + trial * 1_000_003)
    x = torch.randn(base_shape, dtype=dtype, device=device)
    if problem_id == 15:
        return (x, [x.sum(0), {"scale": 2.0}], dist.new_group(list(range(world_size))))
    if problem_id == 16:
        return (x[:, :32], x[:, 32:])  # views into one storage: a copy would not reproduce them
    if problem_id == 5:
        return (torch.randn((rank + 1, 3), dtype=dtype, device=device),)
    if problem_id == 8:
        return (x, 128)
    if problem_id == 9:
        return (torch.empty((1 << 30,), dtype=dtype, device=device),)
    if problem_id == 12:
        return (torch.eye(12000, dtype=torch.float32, device=device),)  # 549 MiB, from a factory with no size
    if problem_id == 17:  # as problem 63: 8 blocks of a 1024 x 1024 float64 covariance, 64 MiB per rank
        return ([torch.eye(1024, dtype=torch.float64, device=device) for _ in range(8)],)
    return (x,)
"""

REFERENCES = {
    "1_sum_with_none": """
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            return y, None
        """,
    "2_sum_as_dict": """
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            return {"sum": y, "ranks": dist.get_world_size()}
        """,
    "3_sum_and_size": """
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            return y, y.shape
        """,
    "4_max": """
        def solution(x):
            y = x.clone()
            dist.all_reduce(y, op=dist.ReduceOp.MAX)
            return y
        """,
    "5_uneven_gather": """
        def solution(x):
            parts = [x.new_empty((r + 1, 3)) for r in range(dist.get_world_size())]
            dist.all_gather(parts, x)
            return torch.cat(parts)
        """,
    "6_group_cache": """
        _GROUPS = {}  # as problem 51: one subgroup per rank, built at the first call and kept

        def solution(x):
            ws = dist.get_world_size()
            if ws not in _GROUPS:
                _GROUPS[ws] = [dist.new_group([r]) for r in range(ws)]
            own = _GROUPS[ws][dist.get_rank()]
            y = x.clone()
            dist.all_reduce(y)
            return y * (1 + dist.get_rank(group=own))  # 0 in its own group: -1 in a group built by another rank
        """,
    "7_bf16_sum": """
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            return y
        """,
    "8_blocks": """
        def solution(x, block):
            assert x.shape[-1] % block == 0, "the last dimension must hold whole blocks"
            y = x.clone()
            dist.all_reduce(y)
            return y
        """,
    "9_huge_inputs": """
        def solution(x):
            return x
        """,
    "11_sparse_bmm": """
        def solution(x):
            n = 1 << 14  # as problem 62: a bmm whose dense count (2e11 FLOPs) is far above its 64 non-zeros
            idx = torch.arange(64).repeat(3, 1) * torch.tensor([[0], [n // 64], [n // 64]])
            psi = torch.sparse_coo_tensor(idx, torch.ones(64), (4, n, n))
            y = torch.bmm(psi, x.float().reshape(1, 1, -1)[:, :, :64].expand(4, n, 64).contiguous())
            dist.all_reduce(y)
            return y.sum(1)
        """,
    "12_huge_identity": """
        def solution(p):
            return p
        """,
    "13_matmul": """
        def solution(x):
            y = x @ x
            dist.all_reduce(y)
            return y
        """,
    "14_data_dependent": """
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            return y[: int((y > 0).sum())]  # a data-dependent shape: the full-size shape run cannot carry it
        """,
    "15_draws_after_its_inputs": """
        def solution(x, extra, group):
            y = x * extra[1]["scale"] + torch.randn(x.shape, dtype=x.dtype)  # the generator, where the build left it
            x.mul_(0)  # on its own input: a later call on the same trial must not see it
            extra[0].add_(1)
            dist.all_reduce(y, group=group)
            return y, extra[0]
        """,
    "16_views": """
        def solution(a, b):
            y = torch.cat([a, b], 1)
            dist.all_reduce(y)
            return y
        """,
    "17_covariance_blocks": """
        def solution(P):
            out = [p * 2 for p in P]
            for p in out:
                dist.all_reduce(p)
            return out
        """,
    "18_triton_double": """
        import triton
        import triton.language as tl

        @triton.jit
        def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

        def solution(x):
            y = torch.empty_like(x)
            double[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
            dist.all_reduce(y)
            return y
        """,
    "10_huge_matmul": """
        def solution(x):
            a = x.reshape(1, *x.shape).expand(1 << 20, *x.shape)  # 2**20 products of 64x64 blocks, no memory
            return torch.bmm(a, a).sum(0)
        """,
}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> pathlib.Path:
    return write_checkout(tmp_path_factory.mktemp("pkb"), BUILDER, REFERENCES)


def screen(capsys, checkout, path, *extra) -> dict:
    """In this process (--no-sandbox): tests here patch the adapter's internals (memory budget, run_calls),
    which a screen re-run inside the sandbox would not see; the sandbox has tests of its own. Without the sizes
    stage (tests/test_screen_sizes.py has its own): at 1024 x 1024 and over its draws it took 112 s of this file."""
    main(["screen", str(path), "--pkb-root", str(checkout), "--world-size", "2", "--no-cost", "--seed", "3",
          "--json", "--no-sandbox", "--sizes-budget", "0", *extra])
    return json.loads(capsys.readouterr().out)


def write(tmp_path, name: str, body: str) -> pathlib.Path:
    path = tmp_path / name
    path.write_text("import torch\nimport torch.distributed as dist\n" + textwrap.dedent(body))
    return path


@pytest.mark.parametrize("stem", ["1_sum_with_none", "2_sum_as_dict", "3_sum_and_size", "5_uneven_gather",
                                  "6_group_cache"])
def test_a_reference_passes_against_itself(capsys, checkout, stem):
    res = screen(capsys, checkout, checkout / "reference" / f"{stem}.py")
    assert res["verdict"] == "pass", res["reasons"]


@pytest.mark.parametrize("name,body,says", [
    ("1_sum_with_none_cuda.py", "def solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n    return y, 0\n",
     "0 != expected None"),
    ("2_sum_as_dict_cuda.py", "def solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n    return {'sum': y}\n",
     "dict keys differ"),
    ("3_sum_and_size_cuda.py", "def solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n"
                               "    return y, (y.shape[0], 1)\n", "!= expected"),
])
def test_outputs_that_are_not_tensors_are_compared_as_pkb_does(capsys, checkout, tmp_path, name, body, says):
    res = screen(capsys, checkout, write(tmp_path, name, body))
    assert res["verdict"] == "reject" and says in res["reasons"][0]["message"], res["reasons"]


def test_inputs_are_in_parallelkernelbench_dtype_bfloat16_unless_asked(capsys, checkout, tmp_path):
    only_bf16 = write(tmp_path, "7_bf16_sum_cuda.py", """
        def solution(x):
            assert x.dtype == torch.bfloat16, f"this kernel is bf16-only, got {x.dtype}"
            y = x.clone()
            dist.all_reduce(y)
            return y
        """)
    assert screen(capsys, checkout, only_bf16)["verdict"] == "pass"
    res = screen(capsys, checkout, only_bf16, "--pkb-dtype", "float32")
    assert res["verdict"] == "reject" and "bf16-only" in res["reasons"][0]["message"]


def test_a_block_size_among_the_inputs_sets_the_screen_size(capsys, checkout):
    assert screen(capsys, checkout, checkout / "reference" / "8_blocks.py")["verdict"] == "pass"


@pytest.fixture
def memory(monkeypatch):
    """Sets the memory the screen has (a worker's --memory-gb), in GiB."""
    from pkbsim.screen import parallelkernelbench_budgets

    def set_to(gib: float) -> None:
        monkeypatch.setattr(parallelkernelbench_budgets, "memory_limit", lambda: int(gib * 2**30))
    set_to(12)
    return set_to


@pytest.mark.parametrize("stem", ["9_huge_inputs", "12_huge_identity"])
def test_inputs_beyond_the_memory_budget_are_inconclusive(capsys, checkout, stem, memory):
    res = screen(capsys, checkout, checkout / "reference" / f"{stem}.py")
    assert res["verdict"] == "inconclusive"
    assert "PkbLimitExceeded" in res["reasons"][0]["message"] and "memory" in res["reasons"][0]["message"]
    assert "(12 GiB, 12 times one call's inputs held at once)" in res["reasons"][0]["message"]


@pytest.mark.parametrize("gib, verdict", [(12, "pass"), (3, "inconclusive")])
def test_the_input_budget_follows_the_memory_the_screen_has(capsys, checkout, memory, gib, verdict):
    memory(gib)  # 2 ranks x 64 MiB of inputs: within 12 GiB's budget (426 MiB per rank), beyond 3 GiB's (42.7 MiB)
    res = screen(capsys, checkout, checkout / "reference" / "17_covariance_blocks.py")
    assert res["verdict"] == verdict, res["reasons"]


def test_a_reference_beyond_the_flop_budget_is_inconclusive_before_it_computes(capsys, checkout):
    res = screen(capsys, checkout, checkout / "reference" / "10_huge_matmul.py")
    assert res["verdict"] == "inconclusive" and "FLOPs per rank" in res["reasons"][0]["message"]
    assert res["seconds"]["functional"] < 30


def test_a_sparse_operand_is_not_counted_as_dense(capsys, checkout):
    res = screen(capsys, checkout, checkout / "reference" / "11_sparse_bmm.py")
    assert res["verdict"] == "pass", res["reasons"]


def test_the_flop_budget_leaves_the_references_compute_trace_alone(checkout):
    from pkbsim.screen.parallelkernelbench import register_parallelkernelbench_tasks
    from pkbsim.taskrun import Call, run_calls
    from tasks.registry import get

    task = get(register_parallelkernelbench_tasks(str(checkout))[13])
    run = run_calls(task, [Call(0)], 2, seed=1, record_compute=True)
    for rank in run.calls[0].trace(task, "screen")["ranks"]:
        assert [op["flops"] for op in rank["ops"] if op["kind"] == "compute" and op["flops"]] == [2 * 64 ** 3]


def test_a_misnumbered_solution_is_paired_by_name(capsys, checkout, tmp_path):
    from pkb.batch.discover import pair
    from tasks.parallelkernelbench.naming import PairingWarning
    from pkbsim.screen.parallelkernelbench import register_parallelkernelbench_tasks

    # numbered like 4_max, named like 7_bf16_sum, and computing the sum (PKB's first commit numbers its
    # solutions one off from its reference/ from problem 34 on)
    sol = write(tmp_path, "4_bf16_sum_cuda.py", "def solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n"
                                               "    return y\n")
    ids = register_parallelkernelbench_tasks(str(checkout))
    with pytest.warns(PairingWarning, match="its number is pkb4_max, its name pkb7_bf16_sum"):
        jobs, unknown = pair([str(sol)], set(), None, ids)
    assert [j.task for j in jobs] == ["pkb7_bf16_sum"] and not unknown
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PairingWarning)
        res = screen(capsys, checkout, sol)
    assert res["task"] == "pkb7_bf16_sum" and res["verdict"] == "pass", res["reasons"]


def test_number_wins_when_the_solution_takes_that_references_parameters(checkout, tmp_path):
    from tasks.parallelkernelbench.naming import PairingWarning, parallelkernelbench_task_for
    from pkbsim.screen.parallelkernelbench import register_parallelkernelbench_tasks

    # a renamed problem: the old name now belongs to another problem, but the parameters are problem 8's
    sol = write(tmp_path, "8_bf16_sum_cuda.py", "def solution(x, block):\n    return x\n")
    with pytest.warns(PairingWarning, match="takes that reference's parameters"):
        ids = register_parallelkernelbench_tasks(str(checkout))
        assert parallelkernelbench_task_for(str(sol), ids) == "pkb8_blocks"


def test_a_reference_that_launches_a_kernel_is_not_slower_than_itself(capsys, checkout):
    """A shape run cannot execute the reference's own Triton kernel: the reference is timed by the candidate's
    rule (screen-size trace scaled to full size), not without the kernel against a candidate timed with it
    (HEAD's 19_blocked_fp8_quantize was rejected as 0.12x of itself)."""
    pytest.importorskip("triton")
    main(["screen", str(checkout / "reference" / "18_triton_double.py"), "--pkb-root", str(checkout),
          "--world-size", "2", "--seed", "3", "--json", "--no-sandbox", "--sizes-budget", "0"])  # the cost stage's test
    res = json.loads(capsys.readouterr().out)
    assert res["verdict"] == "pass" and res["stage"] == "cost", res["reasons"]
    pred = res["predicted"]
    assert 0.9 < pred["speedup"] < 1.1, pred
    assert any("the reference launches device kernels" in n for n in pred["notes"]), pred["notes"]


def _screen_with_cost(capsys, checkout, stem: str) -> dict:
    main(["screen", str(checkout / "reference" / f"{stem}.py"), "--pkb-root", str(checkout),
          "--world-size", "2", "--seed", "3", "--json", "--no-sandbox", "--sizes-budget", "0"])  # the cost stage's tests
    res = json.loads(capsys.readouterr().out)
    assert res["verdict"] == "pass" and res["stage"] == "cost", res["reasons"]
    return res["predicted"]


def test_a_failed_shape_run_of_a_budgeted_task_runs_at_full_size_with_data(capsys, checkout, monkeypatch):
    """A data-dependent shape (`y[: (y > 0).sum()]`) cannot go through a shape run; a ParallelKernelBench problem
    runs under budgets, so the same calls run at full size with data (18 of HEAD's 87 references needed it:
    `.item()`, `.tolist()` of split sizes, nonzero). The twin, a task without budgets, falls back to the
    functional stage's screen-size traces, uncertain."""
    import pkbsim.screen.cost as cost

    runs = []
    real = cost.run_calls

    def counted(task, calls, world_size, **kw):
        runs.append((kw.get("preset"), kw.get("shape_run")))
        return real(task, calls, world_size, **kw)

    monkeypatch.setattr(cost, "run_calls", counted)
    pred = _screen_with_cost(capsys, checkout, "14_data_dependent")
    assert not pred["uncertain"], pred["notes"]
    assert sum("ran at full size with data instead" in n for n in pred["notes"]) == 2, pred["notes"]
    assert runs == [("full", None), ("full", False)]   # this process: the reference's shape run, then with data
    full = pred["reference_us"]

    monkeypatch.setattr(cost, "budgeted", lambda task: False)
    twin = _screen_with_cost(capsys, checkout, "14_data_dependent")
    assert twin["uncertain"] and any("predicted at screen size instead" in n for n in twin["notes"]), twin["notes"]
    assert full > twin["reference_us"] > 0   # 1024 x 1024 against 64 x 64 elements all-reduced


def test_the_screen_keeps_no_copy_of_the_inputs(capsys, checkout, monkeypatch):
    import pkbsim.screen.candidate_side as side
    import pkbsim.screen.functional as functional
    from pkbsim.screen.parallelkernelbench import register_parallelkernelbench_tasks
    from tasks.registry import get

    runs = []

    def kept(real):
        def run(*a, **kw):
            runs.append(real(*a, **kw))
            return runs[-1]
        return run

    monkeypatch.setattr(functional, "run_calls", kept(functional.run_calls))
    monkeypatch.setattr(side, "run_calls", kept(side.run_calls))
    assert screen(capsys, checkout, checkout / "reference" / "7_bf16_sum.py")["verdict"] == "pass"
    (ref_run,) = runs  # the candidate's calls ran in its own process
    path = str(checkout / "reference" / "7_bf16_sum.py")
    slug = register_parallelkernelbench_tasks(str(checkout))[7]
    side.candidate_side(get(slug), side.CandidateJob(slug, path, 2, 3, 60.0, 60.0, False))  # its side, here
    ref_run, cand_run = runs
    assert [len(ref_run.calls), len(cand_run.calls)] == [functional.TRIALS, 1 + functional.BACK_TO_BACK]
    assert all(c.complete for r in runs for c in r.calls)
    assert all(x is None for r in runs for c in r.calls for x in c.inputs)  # only outputs are compared


@pytest.mark.parametrize("stem, ref_builds, cand_builds", [("15_draws_after_its_inputs", 3, 3), ("16_views", 3, 4)])
def test_a_rank_builds_each_trials_inputs_once_per_run(capsys, checkout, stem, ref_builds, cand_builds):
    import pkbsim.screen.candidate_side as side
    from pkbsim.screen.parallelkernelbench import register_parallelkernelbench_tasks
    from tasks.registry import get

    pid = int(stem.split("_")[0])
    slug = register_parallelkernelbench_tasks(str(checkout))[pid]
    built = get(slug).make_inputs.builder.BUILT
    built.clear()
    res = screen(capsys, checkout, checkout / "reference" / f"{stem}.py")  # the functional stage's builds
    assert res["verdict"] == "pass", res["reasons"]  # same inputs and generator state on every call of a trial
    for rank in (0, 1):  # here, the reference's 3 calls (trials 0-2)
        assert len([b for b in built if b[:2] == (pid, rank)]) == ref_builds
    built.clear()  # the candidate's 4 calls (trials 0, 1, 2, 0), its side run in this process
    side.candidate_side(get(slug), side.CandidateJob(slug, str(checkout / "reference" / f"{stem}.py"), 2, 3, 60.0,
                                                     60.0, False))
    for rank in (0, 1):
        assert len([b for b in built if b[:2] == (pid, rank)]) == cand_builds
