"""The reference's FLOP budget (pkbsim/screen/parallelkernelbench_budgets.py) counts a product from its inputs'
shapes, and a convolution from its arguments: the same count as running the op on the meta device, without the meta kernel's shape checks, which
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


# (input, weight, stride, padding, dilation, groups): 1, 2 and 3 spatial dimensions, a stride that does not
# divide, one-element lists broadcast, grouped channels
CONVOLUTIONS = [((2, 3, 17), (4, 3, 5), [2], [1], [1], 1), ((1, 3, 8, 8), (4, 3, 3, 3), [1, 1], [0, 0], [1, 1], 1),
                ((2, 4, 9, 7), (6, 2, 3, 2), [2, 1], [1, 0], [2, 1], 2), ((1, 2, 5, 9, 9), (4, 2, 3, 3, 3), [1], [1], [2], 1),
                ((1, 8, 4, 6, 6), (8, 1, 1, 3, 3), [1, 2, 2], [0, 1, 1], [1, 1, 1], 8)]


def test_every_convolution_is_counted_as_the_meta_device_counts_it():
    for x, w, stride, padding, dilation, groups in CONVOLUTIONS:
        tail = (stride, padding, dilation, False, [0] * (len(x) - 2), groups)
        args = (torch.randn(x), torch.randn(w), None, *tail)
        meta = [torch.empty(s, device="meta") for s in (x, w)]
        for func in (aten.convolution.default, aten._convolution.default):
            extra = (False, False, False, False) if func is aten._convolution.default else ()
            formula = _FORMULAS[func._overloadpacket]
            expect = formula(*meta, None, *tail, *extra, out_val=func(*meta, None, *tail, *extra))
            assert _flops(formula, func, args + extra, {}) == expect > 0, (func, x, w)


def test_a_transposed_convolution_still_goes_through_the_meta_device():
    x, w = torch.randn(1, 4, 8, 8), torch.randn(4, 3, 3, 3)
    args = (x, w, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1)
    assert _flops(_FORMULAS[aten.convolution], aten.convolution.default, args, {}) == 2 * 4 * 3 * 9 * 64


IMPORTS = """
import json, sys, torch
from pkbsim.screen.parallelkernelbench_budgets import FlopBudget
exec(sys.argv[1])
print(json.dumps({"symbolic_shapes": "torch.fx.experimental.symbolic_shapes" in sys.modules}))
"""


def test_counting_a_matmul_or_a_convolution_imports_no_symbolic_shapes():
    # the twin: a transposed convolution's count runs the meta kernel, whose checks import it
    mm = "with FlopBudget('p', 1):\n    torch.randn(8, 4) @ torch.randn(4, 2)\n"
    conv = "with FlopBudget('p', 1):\n    torch.nn.functional.conv3d(torch.randn(1, 3, 4, 8, 8), torch.randn(4, 3, 3, 3, 3))\n"
    up = ("with FlopBudget('p', 1):\n"
          "    torch.nn.functional.conv_transpose2d(torch.randn(1, 4, 8, 8), torch.randn(4, 3, 3, 3))\n")
    assert in_fresh_interpreter(IMPORTS, mm) == {"symbolic_shapes": False}
    assert in_fresh_interpreter(IMPORTS, conv) == {"symbolic_shapes": False}
    assert in_fresh_interpreter(IMPORTS, up) == {"symbolic_shapes": True}
