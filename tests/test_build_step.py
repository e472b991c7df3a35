"""Extension builds happen before the functional stage, off its clock: the runtime stand-in is built once
however many ranks want it at the same time, the candidate's extensions are built by the build step (not
on a simulated rank), and a build error in a helper module names the candidate's own line."""
import os
import pathlib
import threading
import time

import pytest

from pkbsim.cuda import build, device_pass, runtime_libs
from pkbsim.cuda.toolchain import unavailable
from pkbsim.screen.pipeline import ScreenOptions, screen
from pkbsim.timing.topology import load_topology
from tasks.registry import get

HERE = pathlib.Path(__file__).parent
COPY = HERE / "broken_candidates" / "all_reduce__inline_cuda.py"
needs_nvcc = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


def noting_builds(tmp_path, then=lambda: None):
    """A stand-in for build._compile that notes the thread it runs on in a file (the candidate's side of the
    screen runs in a process of its own, where a list of this process's would not see it), and the notes."""
    notes = tmp_path / "built_on.txt"
    real = build._compile

    def compile_and_note(*args, **kwargs):
        with open(notes, "a") as f:
            f.write(threading.current_thread().name + "\n")
        then()
        return real(*args, **kwargs)
    return compile_and_note, lambda: notes.read_text().split() if notes.exists() else []


def run_screen(path, world_size=2):
    return screen(get("all_reduce"), str(path), ScreenOptions(world_size, load_topology("hgx-h100"), seed=1,
                                                              cost=False))


@needs_nvcc
def test_the_runtime_stand_in_is_built_once_for_ranks_that_want_it_together(tmp_path, monkeypatch):
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path))
    builds = []

    def fake_build(out, home):
        builds.append(out)
        time.sleep(0.5)  # long enough for every thread to find the runtime missing
        os.makedirs(out)
        for n in runtime_libs.NAMES:
            pathlib.Path(out, n).touch()

    monkeypatch.setattr(runtime_libs, "_build", fake_build)
    threads = [threading.Thread(target=runtime_libs.runtime_dir) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1


@pytest.mark.slow
@needs_nvcc
def test_extensions_are_built_by_the_build_step_and_found_cached_by_the_ranks(tmp_path, monkeypatch):
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path / "cache"))   # read-only to the candidate's process: notes beside it
    compile_and_note, built_on = noting_builds(tmp_path)
    monkeypatch.setattr(build, "_compile", compile_and_note)
    res = run_screen(COPY, world_size=4)
    assert res.verdict == "pass" and res.correct, res.reasons
    assert built_on() == ["pkb-prebuild"]
    again = run_screen(COPY, world_size=4)
    assert again.verdict == "pass" and built_on() == ["pkb-prebuild"]


@pytest.mark.slow
@needs_nvcc
def test_an_extension_built_on_the_first_call_counts_as_build_time(tmp_path, monkeypatch):
    """A candidate that builds lazily (inside solution, as PKB's compile_cuda_extension helpers are used) is
    built on a rank, with the world's watchdog paused: that time is reported as build, not functional."""
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path / "cache"))
    slow_compile, built_on = noting_builds(tmp_path, lambda: time.sleep(3.0))  # a build this long at least
    monkeypatch.setattr(build, "_compile", slow_compile)
    lazy = tmp_path / "all_reduce.py"
    lazy.write_text(COPY.read_text().replace('ext = load_inline("pkb_copy"', 'def ext_():\n    return load_inline("pkb_copy"')
                    .replace("out = ext.copy(x)", "out = ext_().copy(x)"))
    res = run_screen(lazy)
    assert res.verdict == "pass" and res.correct, res.reasons
    assert built_on() and "pkb-prebuild" not in built_on()   # built by a rank, on its first call
    assert res.seconds["build"] >= 3.0, res.seconds


@needs_nvcc
def test_a_build_error_in_a_helper_module_names_the_candidates_own_line(tmp_path, monkeypatch):
    (tmp_path / "cuda_helper_mod.py").write_text(
        "from torch.utils.cpp_extension import load_inline\n\nSRC = r'''\n"
        "__global__ void k(float* x) { x[0] = undefined_name; }\n'''\n\n"
        "def make():\n    return load_inline('helper_ext', cpp_sources='', cuda_sources=SRC)\n")
    cand = tmp_path / "all_reduce__helper.py"
    cand.write_text("import cuda_helper_mod\n\next = cuda_helper_mod.make()\n\n\ndef solution(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    res = run_screen(cand)
    assert (res.verdict, res.stage, res.reasons[0].kind) == ("reject", "static", "compile_error"), res.reasons
    assert res.reasons[0].site == f"{cand}:3"
    assert res.reasons[0].message.startswith("cuda_helper_mod.py:4: nvcc: error")



@needs_nvcc
def test_a_helper_that_kept_an_earlier_screens_builder_builds_for_the_current_candidate(tmp_path, monkeypatch):
    """Screens in one worker: the helper imports `load_inline` by name during the first screen and keeps it;
    the second candidate's build error must be its own, not the first candidate's."""
    (tmp_path / "shared_builder.py").write_text(
        "from torch.utils.cpp_extension import load_inline\n\n"
        "def make(src):\n    return load_inline('shared_ext', cpp_sources='', cuda_sources=src)\n")
    cands = []
    for name in ("first", "second"):
        c = tmp_path / f"all_reduce__{name}.py"
        c.write_text(f"import shared_builder\n\next = shared_builder.make(r\"\"\"\n"
                     f"__global__ void k(float* x) {{ x[0] = undefined_in_{name}; }}\n\"\"\")\n\n\n"
                     "def solution(x):\n    return x\n")
        cands.append(c)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "shared_builder", raising=False)
    for c, name in zip(cands, ("first", "second")):
        res = run_screen(c)
        assert res.reasons and f"undefined_in_{name}" in res.reasons[0].message, res.reasons
        assert res.reasons[0].site.startswith(str(c))

KERNEL = "__global__ void k(float* x) { x[0] = 1; }\n"
HOST = "#include <torch/extension.h>\nvoid run(torch::Tensor t) { k<<<1, 1>>>(t.data_ptr<float>()); }\n"


@pytest.mark.parametrize("kernel, split", [
    (KERNEL, True),
    ("template <typename T>\n__global__ void k(T* x) { x[0] = 1; }\n", False),  # host code instantiates it
    ("__global__ void k(at::Half* x) { }\n", False),                          # needs torch's headers
], ids=["plain", "template", "torch_type"])
def test_the_device_pass_skips_torch_headers_only_where_every_kernel_survives(kernel, split):
    tu = '#line 3 "cand.py"\n' + kernel + HOST
    out = device_pass.split(tu, "/p/prelude.h")
    assert (out is not None) == split
    if split:
        device, host = out.split("#else\n")
        assert "__global__ void k" in device and "torch" not in device and device.count("\n") == tu.count("\n") + 2
        assert host.startswith('#include "/p/prelude.h"\n' + tu)
