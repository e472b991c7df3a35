"""The line map of an inline-CUDA extension names the program that holds the CUDA source, also when it
builds through a helper module (ParallelKernelBench's solutions call `utils.cuda_helpers.
compile_cuda_extension`): a kernel's faults and limits then point at the program's own lines, never at
the helper or at another file."""
import importlib.util

HELPER = """
from pkbsim.cuda import extension


def compile_extension(src):
    return extension._caller_file([src])
"""

PROGRAM = '''
import helper

SRC = r"""
__global__ void fill(float* p) { p[threadIdx.x] = 1.f; }
"""
ORIGIN = helper.compile_extension(SRC)
'''


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_source_built_through_a_helper_is_located_in_the_calling_program(tmp_path, monkeypatch):
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "prog.py").write_text(PROGRAM)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "helper", raising=False)
    prog = _load(tmp_path / "prog.py", "pkb_test_origin_prog")
    assert prog.ORIGIN == str(tmp_path / "prog.py")


def test_a_source_that_no_caller_holds_falls_back_to_the_nearest_caller(tmp_path, monkeypatch):
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "prog.py").write_text(PROGRAM.replace('ORIGIN = helper.compile_extension(SRC)',
                                                      'ORIGIN = helper.compile_extension("// made " + "at run time")'))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "helper", raising=False)
    prog = _load(tmp_path / "prog.py", "pkb_test_origin_prog2")
    assert prog.ORIGIN == str(tmp_path / "helper.py")
