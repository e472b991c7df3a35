"""A Triton kernel goes through Triton's own compiler (for sm_90, no GPU needed) before the interpreter runs
it on a simulated rank: the interpreter runs `continue` in a kernel loop as Python, which the compiler
rejects (ParallelKernelBench problem 56's ring attention passed the screen and failed on an H200 with
UnsupportedLanguageConstruct). The twin takes the same loop without `continue`."""
import pytest

pytest.importorskip("triton", reason="triton is not installed (pip install 'pkb[triton]')")

PROGRAM = """
import triton, triton.language as tl

@triton.jit
def add_three(x, N: tl.constexpr):
    r = tl.arange(0, N)
    v = tl.load(x + r)
    for i in range(4):
        if i == 3:
            {skip}
        v += 1
    tl.store(x + r, v)

x = torch.zeros(16, device="cuda")
add_three[(1,)](x, N=16)
print("sum", float(x[0]))
"""


def test_a_construct_the_compiler_rejects_fails_at_the_launch(run_program):
    res = run_program(PROGRAM.replace("{skip}", "continue"))
    assert res.verdict == "error", [f.render() for f in res.findings]
    assert "UnsupportedLanguageConstruct" in res.findings[0].message


def test_its_twin_compiles_and_runs(run_program):
    res = run_program(PROGRAM.replace("{skip}", "v -= 1"))
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert res.output.count("sum 3.0") == 2
