"""The GPU a benchmark measured -> the topology pkb predicts it on and that GPU's calibration (`pkb calibrate`
run on it), so a comparison never puts one GPU's times next to another's predictions."""
from __future__ import annotations

import os

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
# torch.cuda.get_device_name() of the parts measured -> (topology, calibration file)
MACHINES = {"NVIDIA H200": ("hgx-h200", "calibration_h200.json"),
            "NVIDIA H100 80GB HBM3": ("hgx-h100", "calibration_h100.json")}


def machine(gpu: str) -> tuple[str, str]:
    """(topology, calibration path) for a measured GPU's name; another part (a GH200, an H100 PCIe) has no
    calibration here and is refused."""
    if gpu in MACHINES:
        topo, cal = MACHINES[gpu]
        return topo, os.path.join(RESULTS, cal)
    raise SystemExit(f"no topology and calibration for the GPU {gpu!r}: add it to benchmarks/gpu_machines.py")
