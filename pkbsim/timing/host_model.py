"""Host launch overhead and compute efficiencies (data/host.toml), optionally overridden by a calibration
file: either a TOML file with the same [launch]/[compute] tables, or the `pkb.calibration/1` JSON that
`pkb calibrate` (hwbackend) measures on a GPU node, from which the efficiencies, the launch overheads and
the kernel floor are derived for the topology being modelled."""
from __future__ import annotations

import json
import math
import tomllib
from importlib import resources

SMALL = 64 << 10   # all_reduce sizes at or below this are latency: measured - modelled = launch overhead


def host_model(calibration: str | None = None, topo=None) -> dict:
    with resources.files("pkbsim.timing").joinpath("data/host.toml").open("rb") as f:
        model = tomllib.load(f)
    if not calibration:
        return model
    doc = _read(calibration)
    if doc.get("schema") == "pkb.calibration/1":
        _from_measurements(model, doc, topo, calibration)
        return model
    for table, values in doc.items():
        if table not in ("launch", "compute") or not isinstance(values, dict):
            raise ValueError(f"{calibration}: unknown table [{table}]; a calibration file has [launch] and [compute]")
        for key, value in values.items():
            if key not in model[table]:
                raise ValueError(f"{calibration}: [{table}] has no field {key!r}; known: {', '.join(model[table])}")
            model[table][key] = value
    return model


def _read(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            return json.load(f) if path.endswith(".json") else tomllib.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read calibration file {path!r} ({e}); give the JSON `pkb calibrate` writes or a "
                         f"TOML file with [launch] and/or [compute] tables") from None


def _from_measurements(model: dict, doc: dict, topo, path: str) -> None:
    """GEMM rate / peak -> matmul efficiency; HBM copy rate / HBM bandwidth -> memory efficiency; small eager
    all_reduce time minus NCCL's modelled time -> eager launch overhead; the `launch` section's tiny kernel
    -> kernel floor, and its CUDA-graph time per op minus that kernel -> graph launch overhead.

    The `launch` section's eager time per op (a plain `add_`) is recorded but does not set torch_eager_us,
    the one eager constant for collectives and compute ops: what eager PyTorch adds to a collective also
    holds c10d's work (the work object, stream and event bookkeeping) that a plain op does not do, and
    that constant is fitted (or calibrated, above) on collectives, where the fidelity points check it."""
    if topo is None:
        raise ValueError("a measured calibration needs the topology it applies to")
    compute = model["compute"]
    dtype = compute["default_dtype"]
    gemm = doc.get("gemm", {}).get(dtype)
    if gemm and dtype in topo.gpu.peak_tflops:
        compute["matmul_efficiency"] = min(1.0, gemm["tflops"] / topo.gpu.peak_tflops[dtype])
    if "hbm_copy" in doc:
        compute["memory_efficiency"] = min(1.0, doc["hbm_copy"]["GBps_read_plus_write"] / topo.gpu.hbm_GBps)
    small = [c for c in doc.get("collectives", []) if c["op"] == "all_reduce" and c["mode"] == "eager"
             and c["bytes"] <= SMALL]
    if small and 2 <= doc.get("gpus", 0) <= topo.num_gpus:
        from pkbsim.timing.predict import predict
        gaps = sorted(c["time_us"] - predict(topo, "all_reduce", c["bytes"], doc["gpus"]).time_us for c in small)
        model["launch"]["torch_eager_us"] = max(0.0, gaps[len(gaps) // 2])
    if "launch" in doc:
        kernel = _measured_us(doc, "tiny_kernel_us", path)
        compute["min_kernel_us"] = kernel
        model["launch"]["cuda_graph_us"] = max(0.0, _measured_us(doc, "graph_op_us", path) - kernel)


def _measured_us(doc: dict, field: str, path: str) -> float:
    value = doc["launch"].get(field) if isinstance(doc["launch"], dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{path}: launch.{field} must be a positive number of microseconds, got {value!r}; "
                         f"run `pkb calibrate` again")
    return float(value)


def launch_overhead_us(model: dict, harness: str) -> float:
    """What the launcher adds per kernel: nothing for nccl-tests (NCCL's model includes its own launch), less
    than nothing for a profiler's kernel duration (`kernel-time`: without the loop's gap that NCCL's model holds)."""
    return {"nccl-tests": 0.0, "kernel-time": -model["launch"]["nccl_loop_gap_us"],
            "torch": model["launch"]["torch_eager_us"],
            "cuda-graph": model["launch"]["cuda_graph_us"], "cuda-events": model["launch"]["event_window_us"]}[harness]
