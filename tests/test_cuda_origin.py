"""The line map of an inline-CUDA extension names the program that holds the CUDA source, also when it
builds through a helper module (ParallelKernelBench's solutions call `utils.cuda_helpers.
compile_cuda_extension`): a kernel's faults and limits then point at the program's own lines, never at
the helper or at another file."""
import importlib.util

HELPER = """
from pkbsim.cuda import extension


def compile_extension(src, given=None):
    return extension._origin(given, [src])
"""

PROGRAM = '''
import helper

SRC = r"""
__global__ void fill(float* p) { p[threadIdx.x] = 1.f; }
"""
ORIGIN = helper.compile_extension(SRC)
'''


def test_an_origin_that_does_not_hold_the_source_gives_way_to_the_caller_that_does(tmp_path, monkeypatch):
    """A helper imported during an earlier screen keeps that screen's stand-in, which names the earlier
    candidate as the origin: the line map must still name the program that holds the source."""
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "other_candidate.py").write_text("# another candidate, without this source\n")
    (tmp_path / "prog.py").write_text(PROGRAM.replace("helper.compile_extension(SRC)",
                                                      f"helper.compile_extension(SRC, {str(tmp_path / 'other_candidate.py')!r})"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "helper", raising=False)
    prog = _load(tmp_path / "prog.py", "pkb_test_origin_prog3")
    assert prog.ORIGIN == str(tmp_path / "prog.py")


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
