"""pkb's stand-in CUDA libraries export what the real ones export, no more, no less (issue 40): the runtime
exactly the functions of the toolkit's libcudart (plus pkb's own `sim_*` calls), the c10 one only c10::cuda and
at::cuda names (plus `sim_*`). Loaded globally, anything more (the C++ library's templates the stand-ins
instantiate) would answer for other libraries' copies. The twin: the runtime's source linked without its export
map exports such templates."""
import os
import subprocess

import pytest

from pkbsim.cuda import runtime_libs
from pkbsim.cuda.toolchain import RUNTIME_SRC, cuda_home, require_nvcc, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


def exports(path: str, demangle: bool = False) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", *(["-C"] if demangle else []), path], capture_output=True,
                         text=True, check=True).stdout
    return {ln.split(None, 2)[2].split("@")[0] for ln in out.splitlines() if len(ln.split(None, 2)) == 3
            and ln.split()[1] != "A"}   # A: a version node's name, not a symbol


def foreign(names: set[str]) -> set[str]:
    return {n for n in names if not n.startswith(("c10::cuda::", "at::cuda::", "sim_"))}


def test_the_runtime_exports_libcudart_s_functions_and_the_c10_one_c10_cuda_s():
    d = runtime_libs.runtime_dir()
    real = set(runtime_libs.real_cudart_exports(cuda_home(require_nvcc())))
    ours = exports(os.path.join(d, runtime_libs.NAMES[0]))
    if real:
        assert {n for n in ours if not n.startswith("sim_")} == real
    assert "__cudaRegisterFunction" in ours and "sim_set_launch_callback" in ours
    c10 = exports(os.path.join(d, runtime_libs.NAMES[1]), demangle=True)
    assert "c10::cuda::current_device()" in c10 and not foreign(c10)


def test_the_twin_linked_without_its_map_exports_templates_too(tmp_path):
    home = cuda_home(require_nvcc())
    so = str(tmp_path / "libplain.so")
    subprocess.run(["g++", "-O1", "-fPIC", "-shared", f"-I{os.path.join(home, 'include')}", "-std=c++17", "-o", so,
                    os.path.join(RUNTIME_SRC, "fakecudart.cpp"), "-ldl"], check=True)
    extra = {n for n in exports(so, demangle=True) if not n.startswith(("cuda", "__cuda", "sim_"))}
    assert any(n.startswith("std::") for n in extra)
