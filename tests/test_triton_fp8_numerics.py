"""8-bit floats in Triton kernels convert as on the GPU (round to nearest even, saturating, as Hopper's
`cvt.rn.satfinite`): Triton 3.6's interpreter stored a float32 -> fp8 cast's value as an integer into the
fp8 bits (1.0 became 0.00195, 127 NaN), so ParallelKernelBench Triton-tree problem 19's quantiser and its
own reference gave NaNs, a false reject. Checked on a simulated rank and, as the buggy twin, on the bare
interpreter outside any world."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton", reason="triton is not installed (pip install 'pkb[triton]')")

VALUES = [1.0, 448.0, 470.0, 127.0, 0.3, -1000.0, 2.0 ** -9]
EXPECTED = [1.0, 448.0, 448.0, 128.0, 0.3125, -448.0, 2.0 ** -9]  # e4m3: 3 mantissa bits, largest 448

KERNEL = """
import triton, triton.language as tl

@triton.jit
def to_fp8_and_back(x, q, y, N: tl.constexpr):
    r = tl.arange(0, N)
    f8 = tl.load(x + r).to(q.dtype.element_ty)
    tl.store(q + r, f8)
    tl.store(y + r, tl.load(q + r).to(tl.float32))
"""


def _program(device: str) -> str:
    return KERNEL + f"""
x = torch.tensor({VALUES + [0.0]}, device="{device}")
q = torch.empty(8, dtype=torch.float8_e4m3fn, device="{device}")
y = torch.empty(8, device="{device}")
to_fp8_and_back[(1,)](x, q, y, N=8)
print("fp8", [float(v) for v in y[:{len(VALUES)}]])
"""


def _printed(text: str) -> list[float]:
    line = next(s for s in text.splitlines() if "fp8 [" in s)
    return [float(v) for v in line.split("fp8 ", 1)[1].strip("[]").split(",")]


def test_fp8_casts_convert_as_on_the_gpu(run_program):
    res = run_program(_program("cuda"), nproc=1)
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert _printed(res.output) == EXPECTED


def test_the_bare_interpreter_gets_them_wrong(tmp_path):
    """The twin: the same kernel on Triton's own interpreter, without pkb's patches."""
    script = tmp_path / "bare.py"
    script.write_text("import os\nos.environ['TRITON_INTERPRET'] = '1'\nimport torch\n" + _program("cpu"))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=dict(os.environ))
    got = _printed(out.stdout)
    assert got != EXPECTED, got  # no saturation (470 -> 480), truncation (127 -> 64)
