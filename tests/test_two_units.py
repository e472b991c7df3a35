"""Extension builds as two units (pkbsim/cuda/two_units.py): the kernels through nvcc, the host code through g++.

The split must never change what a build means: wherever g++ could read the host code otherwise than nvcc
does, or a kernel could be lost, it gives None and the whole unit is built by nvcc, as before. Each rule has
a case that must fall back and its twin that splits; the builds check that an error is still nvcc's own."""
import os

import pytest

from pkbsim.cuda import build, two_units
from pkbsim.cuda.build import ExtensionBuildError
from pkbsim.ptx.compile import find_nvcc

KERNEL = "__global__ void scale(float* x, int n) {\n  int i = threadIdx.x;\n  if (i < n) x[i] *= 2.f;\n}\n"
LAUNCH = ("torch::Tensor run(torch::Tensor x) {\n  scale<<<1, 32, 0,\n      at::cuda::getCurrentCUDAStream()>>>(\n"
          "      x.data_ptr<float>(), (int)x.numel());\n  return x;\n}\n")
BINDING = 'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }\n'


def unit(*parts: str) -> str:
    return '#line 10 "/c/cand.py"\n#include <torch/extension.h>\n' + "".join(parts) + BINDING


def test_a_launch_is_written_as_nvcc_writes_it_and_no_line_moves():
    tu = unit(KERNEL, LAUNCH)
    units = two_units.split(tu, "ext")
    assert units is not None and units.kernels == ("scale",)
    host = units.host_unit.split("\n", 1)[1]   # after the extension's name
    assert host.count("\n") == tu.count("\n")
    assert "<<<" not in host and "(__cudaPushCallConfiguration(1, 32, 0,\n      at::cuda::getCurrentCUDAStream()) ? " \
        "(void)0 : scale(\n      x.data_ptr<float>(), (int)x.numel()))" in host
    # the kernel's body is gone from the host unit: its name now declares the stub the kernel unit defines
    assert "void scale(float* x, int n) ;" in host and "threadIdx" not in host
    assert "torch" not in units.kernel_unit and "__global__ void scale" in units.kernel_unit
    assert units.kernel_unit.count("\n") >= tu.count("\n") - 1


def test_a_kernels_declaration_ends_where_its_body_began_past_a_comment():
    # a parameter list that ends in a line comment: a `;` after the last parameter would be commented out
    kernel = "__global__ void scale(float* x,\n    int n)   // elements\n{\n  x[0] = n;\n}\n"
    units = two_units.split(unit(kernel, LAUNCH), "ext")
    assert "int n)   // elements\n;" in units.host_unit


def test_a_kernel_called_without_a_launch_is_built_whole():
    # nvcc rejects a plain call of a kernel; in the host unit it would be an ordinary call of the stub
    tu = unit(KERNEL, "void run(float* x) { scale(x, 4); }\n")
    assert two_units.split(tu, "ext") is None
    assert two_units.split(unit(KERNEL, "void run(float* x) { scale<<<1, 4>>>(x, 4); }\n"), "ext") is not None


def test_code_that_tests_for_nvcc_is_built_whole():
    # nvcc's host pass defines __CUDACC__, g++ does not: the two would compile different code
    guarded = "#ifdef __CUDACC__\nint on_nvcc = 1;\n#endif\n"
    assert two_units.split(unit(guarded, KERNEL, LAUNCH), "ext") is None
    assert two_units.split(unit("int on_nvcc = 1;\n", KERNEL, LAUNCH), "ext") is not None


@pytest.mark.parametrize("kernel", [
    "namespace {\n__global__ void scale(float* x, int n) { x[0] = n; }\n}\n",     # internal to each unit
    "static __global__ void scale(float* x, int n) { x[0] = n; }\n",              # the same
])
def test_kernels_the_other_unit_could_not_name_are_built_whole(kernel):
    assert two_units.split(unit(kernel, LAUNCH), "ext") is None


TEMPLATE = "template <typename T>\n__global__ void scale(T* x, int n) {\n  x[threadIdx.x] *= (T)2;\n}\n"


def test_a_template_kernels_launched_instances_are_instantiated_in_the_kernel_unit():
    units = two_units.split(unit(TEMPLATE, LAUNCH.replace("scale<<<", "scale<float> <<<")), "ext")
    assert units is not None
    assert "(void)0 : reinterpret_cast<decltype(&scale<float>)>(__pkb_ext_instance_0)(" in units.host_unit
    assert "extern void* __pkb_ext_instance_0;" in units.host_unit and "template <typename T>\n" in units.host_unit
    assert units.kernel_unit.rstrip().endswith("void* __pkb_ext_instance_0 = (void*)&scale<float>;")
    # deduced template arguments: the kernel unit could not name the instance, so the whole unit is built
    assert two_units.split(unit(TEMPLATE, LAUNCH), "ext") is None


def test_host_only_functions_are_defined_in_the_host_unit_alone():
    helper = "int blocks_for(int n) {\n  return (n + 31) / 32;\n}\n"
    units = two_units.split(unit(helper, KERNEL, LAUNCH), "ext")
    assert "blocks_for" in units.host_unit and "blocks_for" not in units.kernel_unit
    device_helper = "__device__ float twice(float v) {\n  return 2.f * v;\n}\n"
    units = two_units.split(unit(device_helper, KERNEL, LAUNCH), "ext")
    assert "twice" in units.kernel_unit and "twice" not in units.host_unit


needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


def _entry_files(so: str) -> list[str]:
    return sorted(os.listdir(os.path.dirname(so)))


@pytest.mark.slow
@needs_nvcc
def test_a_split_build_links_the_kernel_and_host_objects(tmp_path, monkeypatch):
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path))
    so, _ = build.build("pkb_two_units", unit(KERNEL, LAUNCH), [], [], "/c/cand.py")
    files = _entry_files(so)
    assert any(f.endswith("_host.o") for f in files) and any(f.endswith("_kernels.o") for f in files), files


@pytest.mark.slow
@needs_nvcc
def test_host_code_g_plus_plus_cannot_build_falls_back_to_the_whole_unit(tmp_path, monkeypatch):
    # a __constant__ symbol that host code fills: blanked from the host unit, so g++ fails there; nvcc builds it
    const = "__constant__ float factor[1];\n__global__ void use(float* x) { x[0] *= factor[0]; }\n"
    host = ("void run(float* x) {\n  float f = 2.f;\n  cudaMemcpyToSymbol(factor, &f, sizeof f);\n"
            "  use<<<1, 1>>>(x);\n}\n")
    tu = '#line 10 "/c/cand.py"\n#include <torch/extension.h>\n' + const + host
    assert two_units.split(tu, "ext") is not None   # splittable on its face: the host unit's build fails
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path))
    so, _ = build.build("pkb_two_units_const", tu, [], [], "/c/cand.py")
    assert not any(f.endswith("_host.o") for f in _entry_files(so)) and os.path.exists(so)


@pytest.mark.slow
@needs_nvcc
def test_units_that_do_not_link_as_one_fall_back_to_the_whole_unit(tmp_path, monkeypatch):
    # a host variable at file scope lands in both units: two definitions at the link (the whole unit has one)
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path))
    counter = "long launches = 0;\n"
    host = "void run(float* x) {\n  launches += 1;\n  scale<<<1, 32>>>(x, 4);\n}\n"
    tu = '#line 10 "/c/cand.py"\n#include <torch/extension.h>\n' + counter + KERNEL + host
    assert two_units.split(tu, "ext") is not None
    so, _ = build.build("pkb_two_units_link", tu, [], [], "/c/cand.py")
    assert os.path.exists(so) and not any(f.endswith("_host.o") for f in _entry_files(so))


@pytest.mark.slow
@needs_nvcc
def test_a_compile_error_is_nvccs_with_the_candidates_line(tmp_path, monkeypatch):
    # the kernel unit fails, then the whole unit: the message is nvcc's, at the kernel's line in the candidate
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path))
    broken = KERNEL.replace("x[i] *= 2.f;", "x[i] *= undeclared_name;")
    with pytest.raises(ExtensionBuildError, match=r"cand\.py:13: nvcc: error: identifier \"undeclared_name\""):
        build.build("pkb_two_units_error", unit(broken, LAUNCH), [], [], "/c/cand.py")
    # the same unit again: the kept error, with its line, and no compiler run (a re-screen costs no build)
    monkeypatch.setattr(build, "_compile", lambda *a, **k: pytest.fail("built again"))
    with pytest.raises(ExtensionBuildError, match=r"cand\.py:13: nvcc: error: identifier \"undeclared_name\"") as e:
        build.build("pkb_two_units_error", unit(broken, LAUNCH), [], [], "/c/cand.py")
    assert e.value.site == "cand.py:13"


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("bug,verdict", [("", "pass"), ("skip_last", "reject")])
def test_a_template_kernel_built_apart_runs_on_the_simulated_ranks(bug, verdict, monkeypatch, tmp_path):
    # the launch reaches the instance's stub through the kernel unit's pointer: the right kernel runs, and a
    # wrong one is still seen (an empty cache, so that it is built here; no precompiled header: it is speed alone)
    from pkbsim.cuda import host_header
    from pkbsim.ptx.compile import cache_root
    from pkbsim.screen.pipeline import ScreenOptions, own_cache, screen
    from pkbsim.timing.topology import load_topology
    from tasks.registry import get

    monkeypatch.setenv("PKB_CANDIDATE_BUG", bug)
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(host_header, "precompiled", lambda *a, **k: None)
    cand = os.path.join(os.path.dirname(__file__), "cuda_candidates", "template_kernel_all_reduce.py")
    res = screen(get("all_reduce"), cand, ScreenOptions(2, load_topology("hgx-h100"), seed=1, cost=False))
    assert res.verdict.value == verdict, res.reasons
    folders = (own_cache(cand), os.path.join(cache_root(), "cuda-ext"))
    built = [os.path.join(d, e) for d in folders if os.path.isdir(d) for e in os.listdir(d)
             if e.startswith("pkb_template_copy_") and os.path.isdir(os.path.join(d, e))]
    assert any(f.endswith("_host.o") for e in built for f in os.listdir(e)), built
