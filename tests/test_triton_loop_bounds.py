"""A Triton loop `for i in range(lo, hi, BLOCK)` runs under the interpreter with any numpy, its bounds
loaded from memory or constexpr: triton 3.6 turns a bound into an index with `int(array)`, which numpy >= 2.4
refuses for 1-d arrays (triton-lang/triton#9171); both forms failed with numpy 2.4 before the fix."""
import pytest

pytest.importorskip("triton", reason="triton is not installed (pip install 'pkb[triton]')")

PROGRAM = """
import triton, triton.language as tl

@triton.jit
def ranged_sum(x, out, bounds, BLOCK: tl.constexpr, LO: tl.constexpr, HI: tl.constexpr, LOADED: tl.constexpr):
    if LOADED:
        lo = tl.load(bounds)
        hi = tl.load(bounds + 1)
    else:
        lo = LO
        hi = HI
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(lo, hi, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        acc += tl.load(x + offs, mask=offs < hi, other=0.0)
    tl.store(out + tl.arange(0, BLOCK), acc)

x = torch.arange(1000, dtype=torch.float32, device="cuda") + rank
out = torch.zeros(64, device="cuda")
bounds = torch.tensor([100, 1000], dtype=torch.int32, device="cuda")
ranged_sum[(1,)](x, out, bounds, 64, 100, 1000, LOADED)
assert float(out.sum()) == float(x[100:].sum()), (float(out.sum()), float(x[100:].sum()))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("loaded", [True, False], ids=["loaded_bounds", "constexpr_bounds"])
def test_range_over_bounds_loaded_from_memory(run_program, loaded):
    res = run_program(f"LOADED = {loaded}\n" + PROGRAM)
    assert res.verdict == "ok", [f.render() for f in res.findings]   # a Triton launch is checked work
