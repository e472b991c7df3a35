"""bfloat16 in Triton kernels computes as on the GPU: `tl.dot` of bf16 tiles accumulates their values in
float32 (Triton 3.6's interpreter multiplied their raw bits: two 16x16 tiles of ones gave 4228120576), and
a float32 -> bf16 cast rounds to nearest even (the interpreter truncated: 1 + 2^-8 + 2^-10 gave 1.0).
Each is checked on a simulated rank and, as the buggy twin, on the bare interpreter outside any world."""
import os

import pytest

pytest.importorskip("triton", reason="triton is not installed (pip install 'pkb[triton]')")

KERNEL = """
import triton, triton.language as tl

@triton.jit
def dot_and_cast(a, b, c, v, ints, N: tl.constexpr):
    r = tl.arange(0, N)
    tile = r[:, None] * N + r[None, :]
    tl.store(c + tile, tl.dot(tl.load(a + tile), tl.load(b + tile)))
    tl.store(v + r, tl.load(v + r).to(tl.bfloat16).to(tl.float32))
    tl.store(ints + r, tl.load(ints + r).to(tl.bfloat16).to(tl.int32))
"""

PROGRAM = KERNEL + """
a = torch.ones(16, 16, dtype=torch.bfloat16, device="cuda")
c = torch.zeros(16, 16, device="cuda")
v = torch.full((16,), 1 + 2**-8 + 2**-10, device="cuda")
ints = torch.full((16,), 257, dtype=torch.int32, device="cuda")
dot_and_cast[(1,)](a, a, c, v, ints, N=16)
assert float(c[0, 0]) == 16.0, float(c[0, 0])
assert float(v[0]) == 1.0078125, float(v[0])
assert int(ints[0]) == 256, int(ints[0])   # 257 rounds to 256 in bf16 (8 mantissa bits), as on the GPU
dist.destroy_process_group()
"""


def test_bf16_dot_and_casts_compute_as_on_the_gpu(run_program):
    res = run_program(PROGRAM)
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_the_bare_interpreter_gets_them_wrong(tmp_path):
    """The twin: the same kernel on Triton's own interpreter, without pkb's patches."""
    import subprocess
    import sys

    script = tmp_path / "bare.py"
    script.write_text("import os\nos.environ['TRITON_INTERPRET'] = '1'\nimport torch\n" + KERNEL + """
a = torch.ones(16, 16, dtype=torch.bfloat16)
c = torch.zeros(16, 16)
v = torch.full((16,), 1 + 2**-8 + 2**-10)
ints = torch.full((16,), 257, dtype=torch.int32)
dot_and_cast[(1,)](a, a, c, v, ints, N=16)
print(float(c[0, 0]), float(v[0]))
""")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=dict(os.environ))
    dot, cast = map(float, out.stdout.split())
    assert dot != 16.0 and cast == 1.0


ARITH_KERNEL = """
import triton, triton.language as tl

@triton.jit
def bf16_arith(x, y, out, less, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(x + r)
    b = tl.load(y + r)
    tl.store(out + r, tl.maximum(a * b + 0.5, -a))   # bf16 * bf16, a bf16 constant, bf16 max, bf16 negation
    tl.store(less + r, (a < b).to(tl.int32))          # a comparison of bf16 values, negatives included
"""


def test_bf16_arithmetic_computes_on_values_and_rounds_to_bf16(run_program):
    res = run_program(ARITH_KERNEL + """
x = torch.tensor([1.5, -2.0, 3.0, -0.25] * 4, dtype=torch.bfloat16, device="cuda")
y = torch.tensor([2.0, -3.0, -1.0, 0.5] * 4, dtype=torch.bfloat16, device="cuda")
out = torch.empty(16, dtype=torch.bfloat16, device="cuda")
less = torch.empty(16, dtype=torch.int32, device="cuda")
bf16_arith[(1,)](x, y, out, less, N=16)
expect = torch.maximum(x * y + 0.5, -x)
assert torch.equal(out.cpu(), expect.cpu()), (out.tolist(), expect.tolist())
assert less.tolist() == (x < y).int().tolist(), less.tolist()
dist.destroy_process_group()
""")
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_the_bare_interpreter_computes_bf16_on_raw_bits(tmp_path):
    """The twin: Triton's own interpreter has no bf16 constant (get_bf16) and multiplies raw bits."""
    import subprocess
    import sys

    script = tmp_path / "bare_arith.py"
    script.write_text("import os\nos.environ['TRITON_INTERPRET'] = '1'\nimport torch\n" + ARITH_KERNEL + """
x = torch.tensor([1.5, -2.0, 3.0, -0.25] * 4, dtype=torch.bfloat16)
out, less = torch.empty(16, dtype=torch.bfloat16), torch.empty(16, dtype=torch.int32)
try:
    bf16_arith[(1,)](x, x, out, less, N=16)
    print("ran", torch.equal(out, torch.maximum(x * x + 0.5, -x)))
except Exception as e:
    print("raised", type(e).__name__)
""")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=dict(os.environ))
    # Triton wraps the missing get_bf16 (an AttributeError) in its InterpreterError
    assert out.stdout.split()[:2] in (["ran", "False"], ["raised", "InterpreterError"]), out.stdout + out.stderr[-2000:]
