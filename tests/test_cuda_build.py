"""The pure parts of the inline-CUDA path (no nvcc needed): source rewrites and #line placement, PTX
recovery from a fatbin, and warps whose lanes touch several buffers."""
import ctypes
import struct

import numpy as np
import pytest

from pkbsim.cuda.fatbin import module_ptx
from pkbsim.cuda.rewrite import rewrite, translation_unit
from pkbsim.ptx.errors import MemoryFault
from pkbsim.ptx.memory import AddressSpace, Region


def test_rewrites_accept_cpu_tensors_and_keep_lines():
    src = ('#include <c10/cuda/CUDAGuard.h>\nTORCH_CHECK(x.is_cuda());\nat::cuda::OptionalCUDAGuard g(device_of(x));\n'
           'auto o = torch::empty({4}, x.options().device(torch::kCUDA));\nint d = x.get_device();\n')
    out = rewrite(src)
    assert out.count("\n") == src.count("\n")
    assert "#include <c10/cuda/CUDAGuard.h>" in out and "x.is_cpu()" in out
    assert "SimOptionalCUDAGuard" in out and "torch::kCPU" in out and "::sim_get_device(x)" in out


def test_each_source_starts_with_a_line_directive_into_the_candidate():
    cuda = "__global__ void k(float* x) {\n  x[0] = 1.f;\n}\n"
    cpp = "void f(torch::Tensor x);"
    origin_text = f'import torch\nCPP = "{cpp}"\nCUDA = r"""\n{cuda}"""\n'
    tu = translation_unit("ext", [cuda], [cpp], ["f"], "/c/cand.py", origin_text)
    lines = tu.splitlines()
    assert lines[0] == '#line 4 "/c/cand.py"' and lines[1].startswith("__global__")  # the kernel is line 4
    assert '#line 2 "/c/cand.py"' in lines
    assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)" in tu and 'm.def("f"' in tu


def test_ptx_is_read_back_from_an_uncompressed_fatbin():
    ptx = b".version 8.8\n.target sm_90a\n" + b"\0" * 3
    entry = struct.pack("<HHIQ", 1, 0, 16, len(ptx)) + ptx
    body = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entry)) + entry
    data = ctypes.create_string_buffer(body, len(body))
    wrapper = ctypes.create_string_buffer(struct.pack("<iiQQ", 0x466243B1, 1, ctypes.addressof(data), 0), 24)
    assert module_ptx(ctypes.addressof(wrapper)) == ".version 8.8\n.target sm_90a\n"


def test_lanes_in_several_buffers_split_by_region_and_a_wild_lane_faults():
    a, b = np.zeros(64, np.uint8), np.zeros(64, np.uint8)
    space = AddressSpace()
    ra, rb = Region.of_array(a, "a"), Region.of_array(b, "b")
    space.add(ra)
    space.add(rb)
    addrs = np.array([ra.base, rb.base + 8, ra.base + 4], dtype=np.uint64)
    parts = space.split(addrs, 4)
    assert [(r.name, list(sel), list(off)) for sel, r, off in parts] == [("a", [True, False, True], [0, 4]),
                                                                        ("b", [False, True, False], [8])]
    with pytest.raises(MemoryFault, match="outside every mapped buffer"):
        space.split(np.array([ra.base, 16], dtype=np.uint64), 4)


def test_a_cuda_device_with_an_index_becomes_the_cpu_device_without_one():
    """`Device(kCUDA, rank)` for from_blob over a peer pointer: `cpu:5` is no device of a CPU pointer ("Specified
    device cpu:5 does not match device of data cpu", a PKB Triton-tree candidate rejected for it)."""
    src = ("auto o = torch::TensorOptions().device(torch::Device(torch::kCUDA, idx));\n"
           "c10::Device d(c10::DeviceType::CUDA, x.get_device());\n")
    out = rewrite(src)
    assert out == ("auto o = torch::TensorOptions().device(torch::Device(c10::kCPU));\n"
                   "c10::Device d(c10::kCPU);\n")
    assert out.count("\n") == src.count("\n")   # no line added or removed: nvcc's lines stay the candidate's
