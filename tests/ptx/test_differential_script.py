"""benchmarks/ptx_differential.py end to end, with the GPU replaced by a second interpreter run.

The real check needs an H200; this keeps the script's plumbing (PTX loading, parameter packing,
copies, comparison, report) working on CPU-only machines.
"""
import importlib.util
import json
import os

import pytest
import torch

from pkbsim.ptx import AddressSpace, Region, find_nvcc, load_ptx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _script():
    spec = importlib.util.spec_from_file_location("ptx_differential", os.path.join(ROOT, "benchmarks", "ptx_differential.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FakeDevice:
    """Stands in for the CUDA driver: 'device' tensors are CPU clones, launches run the interpreter."""

    def __init__(self):
        self.device_tensors = []
        self.modules = {}

    def to_device(self, tensor):
        clone = tensor.clone()
        self.device_tensors.append(clone)
        return clone

    def function(self, source, ptx, kernel):
        if source not in self.modules:
            self.modules[source] = load_ptx(ptx, source)
        return self.modules[source], kernel

    def launch(self, fn, grid, block, params, shared):
        module, kernel = fn
        space = AddressSpace()
        for t in self.device_tensors:
            space.add(Region.of_tensor(t))
        module.launch_raw(kernel, grid, block, params, shared, memory=space)


def test_differential_report_on_a_fake_gpu(tmp_path, monkeypatch):
    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    script = _script()
    device = FakeDevice()
    monkeypatch.setattr(script, "Driver", lambda: device)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self: device.to_device(self))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "fake")
    report = tmp_path / "r.json"
    rc = script.main([str(report), "--cases", "saxpy,int_divmod,bf16x2_fma,struct_param,warp_scan,mma_gemm"])
    data = json.loads(report.read_text())
    assert rc == 0 and data["cases"] == 6 and data["matched"] == 6
    outputs = [o for r in data["results"] for o in r["outputs"]]
    assert {o["tolerance"] for o in outputs if o["dtype"] == "int32"} == {"bit-exact"}
    assert all(o["interpreter_vs_numpy"] for o in outputs)


def test_unknown_case_is_a_usage_error(capsys):
    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    assert _script().main(["/tmp/x.json", "--cases", "nope"]) == 2
    assert "unknown case(s): nope" in capsys.readouterr().err
