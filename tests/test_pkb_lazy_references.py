"""A ParallelKernelBench checkout's references are imported when a problem is used, not when the checkout is
registered (tasks/parallelkernelbench/checkout.py: Reference): a screen needs one of 87, and one imports triton."""
import inspect

import pytest
from pkb_checkout import write_checkout

from pkbsim.screen.parallelkernelbench import register_parallelkernelbench_tasks
from tasks.parallelkernelbench.checkout import CheckoutError
from tasks.registry import get

BUILDER = """
import torch


def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, device=None):
    return (torch.ones(base_shape, dtype=dtype, device=device),)
"""


@pytest.fixture
def checkout(tmp_path):
    marker = tmp_path / "imported.txt"
    (tmp_path / "pkb").mkdir()
    root = write_checkout(tmp_path / "pkb", BUILDER, {
        "1_scaled_sum": f"""
            open({str(marker)!r}, "a").write("1\\n")

            def solution(x, scale=2.0):
                dist.all_reduce(x)
                return x * scale
            """,
        "2_no_solution": "def helper(x):\n    return x\n",
    })
    return root, marker


def test_registering_a_checkout_imports_none_of_its_references(checkout):
    root, marker = checkout
    ids = register_parallelkernelbench_tasks(str(root))
    assert not marker.exists()
    params = list(inspect.signature(get(ids[1]).reference).parameters)
    assert params == ["x", "scale"] and marker.read_text() == "1\n"   # imported once, when first needed
    inspect.signature(get(ids[1]).reference)
    assert marker.read_text() == "1\n"


def test_a_reference_without_solution_is_still_named_when_its_problem_is_used(checkout):
    root, _ = checkout
    ids = register_parallelkernelbench_tasks(str(root))
    with pytest.raises(CheckoutError, match="2_no_solution.py defines no solution"):
        inspect.signature(get(ids[2]).reference)
