"""Speed of the PTX interpreter (pkbsim.ptx) on this machine.

    python benchmarks/ptx_speed.py [--json]

Reports warp-instructions per second (a warp-instruction = one instruction issued for one warp with
any active lane; CTAs are batched into lane groups of up to 4096 threads, so one interpreted
instruction usually covers many warps; the last row disables batching), the wall time of a 1-Mi-element bf16 elementwise kernel and of a 256x256x256
mma.sync bf16 GEMM, each checked against numpy. Compile time is excluded (PTX is cached).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pkbsim.ptx import compile_cuda, find_nvcc


def _module(name):
    with open(os.path.join(ROOT, "tests", "ptx_kernels", name)) as fh:
        return compile_cuda(fh.read(), name)


def _timed(mod, *args, **kw):
    t0 = time.perf_counter()
    counters = mod.launch(*args, **kw)
    return time.perf_counter() - t0, counters.warp_instructions


def bf16_elementwise(mod, n=1 << 20, **launch_opts):
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.standard_normal(n, np.float32)).to(torch.bfloat16)
    b = torch.from_numpy(rng.standard_normal(n, np.float32)).to(torch.bfloat16)
    c = torch.zeros(n, dtype=torch.bfloat16)
    secs, wi = _timed(mod, "bf16_add_f32acc", n // 256, 256, (a, b, c, n), **launch_opts)
    assert torch.equal(c, (a.float() + b.float()).to(torch.bfloat16)), "bf16 elementwise result is wrong"
    return secs, wi


def mma_gemm(mod, size=256):
    rng = np.random.default_rng(0)
    A = torch.from_numpy(rng.standard_normal((size, size), np.float32)).to(torch.bfloat16)
    Bt = torch.from_numpy(rng.standard_normal((size, size), np.float32)).to(torch.bfloat16)
    C = torch.zeros(size * size)
    secs, wi = _timed(mod, "mma_bf16_gemm", (size // 8, size // 16), 32, (A, Bt, C, size, size, size))
    ref = A.double() @ Bt.double().T
    assert np.allclose(C.numpy().reshape(size, size), ref.numpy(), rtol=1e-4, atol=1e-3), "GEMM result is wrong"
    return secs, wi


def unbatched(mod):
    """One warp per lane group: the cost of an interpreted instruction without CTA batching."""
    return bf16_elementwise(mod, n=1 << 16, lanes_per_group=32)


def scalar_heavy(mod, n=4096):
    """Divergent integer loops: the interpreter's per-instruction cost with little vector width."""
    x = torch.from_numpy(np.random.default_rng(0).integers(1, 100000, n, dtype=np.uint32))
    steps = torch.zeros(n, dtype=torch.uint32)
    return _timed(mod, "collatz_steps", n // 128, 128, (x, steps, n))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args(argv)
    if find_nvcc() is None:
        print("ptx_speed: nvcc not found; install the CUDA toolkit or set CUDA_HOME", file=sys.stderr)
        return 2
    ew, coop = _module("elementwise.cu"), _module("cooperative.cu")
    rows = []
    for label, fn, mod in (("bf16 add, 1 Mi elements", bf16_elementwise, ew),
                           ("mma.sync GEMM 256x256x256", mma_gemm, coop),
                           ("divergent loops (collatz, 4096 threads)", scalar_heavy, ew),
                           ("bf16 add, 64 Ki elements, 1 CTA per group", unbatched, ew)):
        secs, wi = fn(mod)
        rows.append({"workload": label, "seconds": round(secs, 3), "warp_instructions": wi,
                     "warp_instructions_per_s": round(wi / secs)})
    if args.json:
        print(json.dumps({"rows": rows, "torch": torch.__version__, "cpus": os.cpu_count()}, indent=2))
        return 0
    print(f"{'workload':44} {'seconds':>8} {'warp-instr':>12} {'warp-instr/s':>13}")
    for r in rows:
        print(f"{r['workload']:44} {r['seconds']:8.3f} {r['warp_instructions']:12,d} {r['warp_instructions_per_s']:13,d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
