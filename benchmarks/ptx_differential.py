"""Differential check: the PTX corpus on a real GPU versus the interpreter (pkbsim.ptx).

    python benchmarks/ptx_differential.py REPORT.json [--cases a,b,...] [--ptx-dir DIR]
    python benchmarks/ptx_differential.py --emit-ptx DIR        # on a machine with nvcc, no GPU needed

Every case of tests/ptx/cases.py runs twice on the same random inputs: through the interpreter on the
CPU and through the CUDA driver (ctypes, libcuda) on GPU 0, from the very same PTX. Integer and
boolean outputs must match bit for bit; floating-point outputs within rounding (a few ulp of the
output type, or the case's own tolerance where the order of float atomics is free). Each side is
also checked against the numpy reference. Writes a JSON report and prints a table. Exit status:
0 all match, 1 some mismatch, 2 the environment is not usable (no GPU, no nvcc and no --ptx-dir).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pkbsim.errors import SimulatorError
from pkbsim.ptx import find_nvcc, load_ptx
from pkbsim.ptx.compile import compile_to_ptx
from tests.ptx import cases

SOURCES = {"elementwise.cu": cases.ELEMENTWISE, "cooperative.cu": cases.COOPERATIVE}
ULPS = {torch.float32: 2.0 ** -21, torch.float16: 2.0 ** -9, torch.bfloat16: 2.0 ** -6, torch.float64: 2.0 ** -50}


class UsageError(Exception):
    pass


def load_ptx_texts(ptx_dir: str | None) -> dict[str, str]:
    texts = {}
    for name in SOURCES:
        if ptx_dir:
            path = os.path.join(ptx_dir, name + ".ptx")
            if not os.path.exists(path):
                raise UsageError(f"{path} is missing: create it with --emit-ptx {ptx_dir} on a machine with nvcc")
            with open(path) as fh:
                texts[name] = fh.read()
            continue
        if find_nvcc() is None:
            raise UsageError("nvcc not found: install the CUDA toolkit, or run --emit-ptx DIR where nvcc exists "
                             "and pass --ptx-dir DIR here")
        with open(os.path.join(ROOT, "tests", "ptx_kernels", name)) as fh:
            texts[name] = compile_to_ptx(fh.read(), name)
    return texts


class Driver:
    """The few CUDA driver calls needed to JIT PTX and launch a kernel in torch's context."""

    def __init__(self):
        if not torch.cuda.is_available():
            raise UsageError("no CUDA GPU visible to torch: run this on a GPU machine")
        torch.empty(1, device="cuda")            # makes torch's primary context current
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise UsageError(f"cannot load libcuda.so.1 ({e}): is the NVIDIA driver installed?") from None
        self._check(self.lib.cuInit(0), "cuInit")
        ctx = ctypes.c_void_p()
        self._check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            dev = ctypes.c_int()
            self._check(self.lib.cuDeviceGet(ctypes.byref(dev), torch.cuda.current_device()), "cuDeviceGet")
            self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            self._check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self.modules = {}

    def _check(self, rc, what):
        if rc != 0:
            msg = ctypes.c_char_p()
            self.lib.cuGetErrorString(rc, ctypes.byref(msg))
            raise RuntimeError(f"{what} failed: {rc} {msg.value.decode() if msg.value else ''}")

    def function(self, name: str, ptx: str, kernel: str):
        if name not in self.modules:
            mod = ctypes.c_void_p()
            self._check(self.lib.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(ptx.encode())),
                        f"cuModuleLoadData({name})")
            self.modules[name] = mod
        fn = ctypes.c_void_p()
        self._check(self.lib.cuModuleGetFunction(ctypes.byref(fn), self.modules[name], kernel.encode()),
                    f"cuModuleGetFunction({kernel})")
        return fn

    def launch(self, fn, grid, block, params: bytes, shared: int):
        buf = ctypes.create_string_buffer(params, max(len(params), 1))
        size = ctypes.c_size_t(len(params))
        extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self._check(self.lib.cuLaunchKernel(fn, *map(ctypes.c_uint, g), *map(ctypes.c_uint, b),
                                            ctypes.c_uint(shared), stream, None, extra), "cuLaunchKernel")
        torch.cuda.synchronize()


def _dim(v):
    return (v,) if isinstance(v, int) else tuple(v)


def run_case(case, source: str, interp, driver: Driver, ptx: str, seed: int):
    def cpu_launch(name, grid, block, args, shared_bytes=0):
        interp.launch(name, grid, block, args, shared_bytes)

    def gpu_launch(name, grid, block, args, shared_bytes=0):
        device = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
        raw = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in device]
        driver.launch(driver.function(source, ptx, name), _dim(grid), _dim(block),
                      interp.pack_params(name, raw), shared_bytes)
        for host, dev in zip(args, device):
            if isinstance(host, torch.Tensor):
                host.copy_(dev.cpu())

    t0 = time.perf_counter()
    cpu = case(cpu_launch, np.random.default_rng(seed))
    t_cpu = time.perf_counter() - t0
    gpu = case(gpu_launch, np.random.default_rng(seed))
    outputs = []
    for (name, got_c, exp, rtol, atol), (_, got_g, _, _, _) in zip(cpu, gpu):
        outputs.append(compare(name, got_c, got_g, exp, rtol, atol))
    return {"case": case.__name__, "source": source, "interpreter_s": round(t_cpu, 3), "outputs": outputs,
            "match": all(o["match"] for o in outputs)}


def compare(name, cpu: torch.Tensor, gpu: torch.Tensor, expected, rtol, atol) -> dict:
    exact_kind = not cpu.dtype.is_floating_point
    c = (cpu.double() if cpu.dtype != torch.uint64 else cpu).numpy().reshape(-1)
    g = (gpu.double() if gpu.dtype != torch.uint64 else gpu).numpy().reshape(-1)
    e = np.asarray(expected).reshape(-1)
    if exact_kind:
        match = bool(np.array_equal(c, g))
        diff = int(np.count_nonzero(c != g))
        tol = "bit-exact"
    else:
        ulp = ULPS.get(cpu.dtype, 2.0 ** -21)
        r, a = max(rtol, 4 * ulp), max(atol, 4 * ulp * 1e-3)
        match = bool(np.allclose(c, g, rtol=r, atol=a, equal_nan=True))
        diff = float(np.max(np.abs(c - g))) if c.size else 0.0
        tol = f"rtol={r:.1e} atol={a:.1e}"
    ef = e.astype(np.float64)
    return {"output": name, "dtype": str(cpu.dtype).replace("torch.", ""), "elements": int(c.size),
            "match": match, "tolerance": tol, "max_abs_diff" if not exact_kind else "differing_elements": diff,
            "interpreter_vs_numpy": bool(np.allclose(c.astype(np.float64), ef, rtol=rtol, atol=atol)),
            "gpu_vs_numpy": bool(np.allclose(g.astype(np.float64), ef, rtol=max(rtol, 1e-5), atol=max(atol, 1e-6)))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", nargs="?", help="where to write the JSON report")
    ap.add_argument("--cases", help="comma-separated case names (default: all)")
    ap.add_argument("--ptx-dir", help="use PTX written by --emit-ptx instead of calling nvcc")
    ap.add_argument("--emit-ptx", metavar="DIR", help="compile the corpus to DIR/<file>.ptx and exit")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        texts = load_ptx_texts(args.ptx_dir)
        if args.emit_ptx:
            os.makedirs(args.emit_ptx, exist_ok=True)
            for name, text in texts.items():
                with open(os.path.join(args.emit_ptx, name + ".ptx"), "w") as fh:
                    fh.write(text)
            print(f"wrote {len(texts)} PTX files to {args.emit_ptx}")
            return 0
        if not args.report:
            raise UsageError("give the path of the JSON report to write")
        wanted = set(args.cases.split(",")) if args.cases else None
        known = {c.__name__ for cs in SOURCES.values() for c in cs}
        if wanted and wanted - known:
            raise UsageError(f"unknown case(s): {', '.join(sorted(wanted - known))}")
        driver = Driver()
    except (UsageError, SimulatorError) as e:  # nvcc's errors and the interpreter's
        print(f"ptx_differential: {e}", file=sys.stderr)
        return 2
    results = []
    for source, case_list in SOURCES.items():
        interp = load_ptx(texts[source], source)
        for case in case_list:
            if wanted and case.__name__ not in wanted:
                continue
            try:
                results.append(run_case(case, source, interp, driver, texts[source], args.seed))
            except Exception as e:  # one broken case must not lose the others' results
                results.append({"case": case.__name__, "source": source, "match": False,
                                "error": f"{type(e).__name__}: {e}"})
    report = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "seed": args.seed,
              "cases": len(results), "matched": sum(r["match"] for r in results), "results": results}
    with open(args.report, "w") as fh:
        json.dump(report, fh, indent=2)
    print(f"{'case':22} {'outputs':>7}  {'result':10} detail")
    for r in results:
        detail = r.get("error") or "; ".join(
            f"{o['output']}: {'ok' if o['match'] else 'DIFF'} ({o['tolerance']})" for o in r["outputs"])
        print(f"{r['case']:22} {len(r.get('outputs', [])):7d}  {'match' if r['match'] else 'MISMATCH':10} {detail[:90]}")
    print(f"{report['matched']}/{report['cases']} cases match on {report['device']}; report: {args.report}")
    return 0 if report["matched"] == report["cases"] else 1


if __name__ == "__main__":
    sys.exit(main())
