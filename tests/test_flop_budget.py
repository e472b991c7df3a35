"""The reference's FLOP budget (pkbsim/screen/parallelkernelbench_budgets.py) counts a product from its inputs'
shapes: the same count as running the op on the meta device, without the meta kernel's shape checks, which
import torch's symbolic-shapes module (and sympy) on first use: 1.7 s of a warm screen."""
import torch

from pkbsim.screen.parallelkernelbench_budgets import _FORMULAS, _INPUT_SHAPED, _flops

from conftest import in_fresh_interpreter

aten = torch.ops.aten
A, B = torch.randn(3, 64, 32), torch.randn(3, 32, 16)
CASES = [(aten.mm.default, (A[0], B[0])), (aten.addmm.default, (torch.randn(64, 16), A[0], B[0])),
         (aten.bmm.default, (A, B)), (aten.baddbmm.default, (torch.randn(3, 64, 16), A, B))]


def test_every_product_is_counted_as_the_meta_device_counts_it():
    assert {f for f, _ in CASES} == _INPUT_SHAPED
    for func, args in CASES:
        formula = _FORMULAS[func._overloadpacket]
        meta = [torch.empty_like(a, device="meta") for a in args]
        assert _flops(formula, func, args, {}) == formula(*meta, out_val=func(*meta)) > 0, func


def test_a_product_of_mismatched_shapes_is_left_to_the_op_to_refuse():
    assert _flops(_FORMULAS[aten.mm], aten.mm.default, (A[0], A[0]), {}) == 0.0


def test_a_convolution_still_goes_through_the_meta_device():
    x, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
    args = (x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert _flops(_FORMULAS[aten.convolution], aten.convolution.default, args, {}) == 2 * 4 * 3 * 9 * 36


IMPORTS = """
import json, sys, torch
from pkbsim.screen.parallelkernelbench_budgets import FlopBudget
exec(sys.argv[1])
print(json.dumps({"symbolic_shapes": "torch.fx.experimental.symbolic_shapes" in sys.modules}))
"""


def test_counting_a_matmul_imports_no_symbolic_shapes():
    # the twin: a convolution's count runs the meta kernel, whose checks import it
    mm = "with FlopBudget('p', 1):\n    torch.randn(8, 4) @ torch.randn(4, 2)\n"
    conv = "with FlopBudget('p', 1):\n    torch.nn.functional.conv2d(torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3))\n"
    assert in_fresh_interpreter(IMPORTS, mm) == {"symbolic_shapes": False}
    assert in_fresh_interpreter(IMPORTS, conv) == {"symbolic_shapes": True}
