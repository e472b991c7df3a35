"""The cuBLAS headers of NVIDIA's wheel (pkb's cuda extra) are used also where a system toolkit is, when that
toolkit has none (issue 40): a candidate's cuBLAS call then compiles as on a GPU machine and is pkb's limit
when called (inconclusive, naming the call), where pkb's stand-in header, which declares only types, made it a
compile error (a reject for pkb's limit). Shown with a fake toolkit and a fake wheel: the wheel's folder comes
after the toolkit's (`-isystem`), and pkb's stand-in cublas_v2.h gives way to the real one; the twins: a toolkit
with its own cuBLAS headers gets no wheel folder, and without a real header the stand-in's types stay."""
import os
import subprocess

import pytest

from pkbsim.cuda.toolchain import RUNTIME_SRC, unavailable, wheel_headers
from pkbsim.ptx.compile import find_nvcc

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
REAL = "#pragma once\n#define PKB_TEST_REAL_CUBLAS 1\ntypedef struct cublasContext* cublasHandle_t;\n"


def _tree(tmp_path, toolkit_has_cublas: bool, wheel_headers=("cublas_v2.h",), toolkit_headers=()):
    toolkit, wheel = tmp_path / "toolkit", tmp_path / "site" / "nvidia"
    (toolkit / "include").mkdir(parents=True)
    (toolkit / "include" / "cuda_runtime_api.h").write_text("")
    (wheel / "cu13" / "include").mkdir(parents=True)
    for header in wheel_headers:
        (wheel / "cu13" / "include" / header).write_text(REAL)
    for header in (*toolkit_headers, *(("cublas_v2.h",) if toolkit_has_cublas else ())):
        (toolkit / "include" / header).write_text(REAL)
    return str(toolkit), str(wheel)


def _cuda13() -> str:
    nvcc = find_nvcc()
    if "release 13." not in subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout:
        pytest.skip("the wheels are CUDA 13's")
    return nvcc


def test_the_wheels_cublas_folder_comes_after_a_toolkit_without_one(tmp_path, monkeypatch):
    nvcc = _cuda13()
    toolkit, wheel = _tree(tmp_path, toolkit_has_cublas=False)
    monkeypatch.setenv("CUDA_HOME", toolkit)
    assert wheel_headers(nvcc, [wheel]) == ["-isystem", os.path.join(wheel, "cu13", "include")]


def test_the_twin_toolkit_with_its_own_cublas_headers_gets_no_wheel_folder(tmp_path, monkeypatch):
    toolkit, wheel = _tree(tmp_path, toolkit_has_cublas=True)
    monkeypatch.setenv("CUDA_HOME", toolkit)
    assert wheel_headers(find_nvcc(), [wheel]) == []


def test_the_curand_wheel_alone_gives_its_device_headers_to_a_toolkit_without_them(tmp_path, monkeypatch):
    """curand_kernel.h (device-side generators a kernel inlines) from nvidia-curand with no cuBLAS wheel: the
    folder is searched, and the build still knows it has only the stand-in of cuBLAS."""
    nvcc = _cuda13()
    toolkit, wheel = _tree(tmp_path, toolkit_has_cublas=True, wheel_headers=("curand_kernel.h",))
    monkeypatch.setenv("CUDA_HOME", toolkit)
    assert wheel_headers(nvcc, [wheel]) == ["-isystem", os.path.join(wheel, "cu13", "include")]


def test_the_twin_toolkit_with_its_own_curand_headers_gets_no_wheel_folder(tmp_path, monkeypatch):
    toolkit, wheel = _tree(tmp_path, toolkit_has_cublas=True, wheel_headers=("curand_kernel.h",),
                           toolkit_headers=("curand_kernel.h",))
    monkeypatch.setenv("CUDA_HOME", toolkit)
    assert wheel_headers(find_nvcc(), [wheel]) == []


@pytest.mark.parametrize("header, hint", [("curand_kernel.h", True), ("kittens.cuh", False)])
def test_a_missing_library_header_names_the_extra_that_installs_it(header, hint):
    from pkbsim.cuda.toolchain import missing_header
    line = missing_header(f'cand.py(3): fatal error: {header}: No such file or directory\n')
    assert line.startswith(f"missing header {header} (not installed here") and ("pkb[cuda]" in line) == hint, line


def _preprocessed(*flags: str) -> str:
    src = "#include <cublas_v2.h>\ncublasHandle_t h;\n"
    return subprocess.run(["g++", "-E", "-x", "c++", "-", f"-I{os.path.join(RUNTIME_SRC, 'include')}", *flags],
                          input=src, capture_output=True, text=True, check=True).stdout


def test_the_stand_in_gives_way_to_a_real_header_and_keeps_its_types_without_one(tmp_path):
    _, wheel = _tree(tmp_path, toolkit_has_cublas=False)
    real = _preprocessed("-isystem", os.path.join(wheel, "cu13", "include"))
    assert "cu13/include/cublas_v2.h" in real and "CUBLAS_OP_N" not in real
    alone = _preprocessed()
    assert "CUBLAS_OP_N" in alone and "cu13" not in alone


@pytest.mark.parametrize("has_real", [False, True])
def test_an_undeclared_cublas_call_is_pkbs_limit_only_where_the_stand_in_alone_was_seen(monkeypatch, has_real):
    """Without a real cublas_v2.h the call is undeclared through pkb's fault (inconclusive, naming the fix); with
    one, it is the candidate's compile error (as nvcc says on a GPU machine), as is any other undeclared name."""
    from pkbsim.cuda import build
    monkeypatch.setattr(build, "has_real_cublas", lambda nvcc: has_real)
    log = 'cand.py(13): error: identifier "cublasSgemm" is undefined\n'
    error = build._build_error(log, "cand.py", "nvcc")
    assert isinstance(error, build.MissingHeader) != has_real
    if not has_real:
        assert "cublas_v2.h" in str(error) and "pkb[cuda]" in str(error)
    assert not isinstance(build._build_error(log.replace("cublasSgemm", "my_gemm"), "cand.py", "nvcc"),
                          build.MissingHeader)
