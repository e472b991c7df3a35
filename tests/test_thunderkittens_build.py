"""ThunderKittens (ParallelKittens) extensions: the headers' root, pkb's copy of them, the error site of a
header error, and per-rank helper modules. The fake checkout below is a few lines of our own, standing in
for a ThunderKittens tree (kittens.cuh, pyutils/torchutils.cuh including "parallel_tensor.cuh")."""
import os
import sys

import pytest

from pkbsim.cuda import build, thunderkittens

TU = '#include "kittens.cuh"\n#include "pyutils/torchutils.cuh"\nvoid f() {}\n'


def _fake_root(base) -> str:
    root = base / "tk"
    (root / "include" / "pyutils").mkdir(parents=True)
    (root / "prototype").mkdir()
    (root / "include" / "kittens.cuh").write_text("#pragma once\n")
    (root / "include" / "pyutils" / "torchutils.cuh").write_text(
        '#pragma once\n#include "parallel_tensor.cuh"\n'
        "inline bool ok(const at::Tensor& t, int r) { return t.is_cuda() && t.device().index() == r; }\n")
    (root / "include" / "pyutils" / "parallel_tensor.cuh").write_text('#error "the original broker path"\n')
    return str(root)


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for var in thunderkittens.ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path / "cache"))


def test_a_unit_without_thunderkittens_keeps_its_paths(clean_env):
    assert thunderkittens.include_paths("#include <cuda.h>\n", ["/x"]) == ["/x"]


def test_no_checkout_is_a_limit_that_names_the_variable(clean_env):
    assert thunderkittens.include_paths(TU, ["/opt/thunderkittens/include"]) is None
    assert "PKB_THUNDERKITTENS_ROOT" in thunderkittens.NOT_FOUND
    with pytest.raises(build.MissingHeader, match="ThunderKittens not found.*PKB_THUNDERKITTENS_ROOT"):
        build.build("tk_ext", TU, [], ["/opt/thunderkittens/include"], "cand.py")


def test_the_checkout_comes_from_the_include_path_or_the_variable(clean_env, monkeypatch, tmp_path):
    root = _fake_root(tmp_path)
    assert thunderkittens.find_root([os.path.join(root, "include")]) == root
    assert thunderkittens.find_root(["/opt/thunderkittens/include"]) is None
    monkeypatch.setenv("PKB_THUNDERKITTENS_ROOT", root)
    assert thunderkittens.find_root(["/opt/thunderkittens/include"]) == root


def test_pkbs_copy_replaces_the_broker_and_rewrites_device_checks(clean_env, monkeypatch, tmp_path):
    root = _fake_root(tmp_path)
    monkeypatch.setenv("PKB_THUNDERKITTENS_ROOT", root)
    paths = thunderkittens.include_paths(TU, ["/opt/thunderkittens/include"])
    inc, proto = paths[:2]
    assert paths[2:] == ["/opt/thunderkittens/include"] and os.path.isdir(proto)
    assert os.path.isfile(os.path.join(inc, "kittens.cuh"))
    with open(os.path.join(inc, "pyutils", "parallel_tensor.cuh")) as f:
        own = f.read()
    assert "#error" not in own and "pkbsim.cuda.tk_parallel" in own and "struct TKParallelTensor" in own
    with open(os.path.join(inc, "pyutils", "torchutils.cuh")) as f:
        text = f.read()
    assert "t.is_cpu()" in text and "::pkb_tk_device_index(t) == r" in text
    with open(os.path.join(root, "include", "pyutils", "torchutils.cuh")) as f:
        assert "is_cuda()" in f.read()    # the checkout itself is never touched
    assert thunderkittens.include_paths(TU, []) [:2] == paths[:2]   # made once per content


def test_thunderkittens_units_keep_their_kernels_in_the_device_pass():
    # kernels are templates that kittens::py::launch_kernel instantiates from host code
    assert build._split(TU + "__global__ void k() {}\n") is None


def test_an_error_in_a_header_names_the_candidates_line(tmp_path):
    origin = str(tmp_path / "12_x.py")
    log = (f"/tk/include/pyutils/torchutils.cuh(192): error: class \"g\" has no member \"grid\"\n"
           "          grid = G.grid();\n"
           f"          detected during instantiation of \"void launch_kernel<C,G,K>(const G &)\" at line 125 of {origin}\n"
           "\n1 error detected\n")
    err = build._build_error(log, origin, "nvcc")
    assert err.site == "12_x.py:125"
    assert str(err).startswith("12_x.py:125: nvcc: error (in torchutils.cuh:192): class \"g\" has no member")
    other = build._build_error(log.replace(origin, "/elsewhere/y.cu"), origin, "nvcc")
    assert other.site == "" and str(other).startswith("torchutils.cuh:192: nvcc: error")


def test_helper_modules_beside_the_tree_are_each_ranks_own(tmp_path, monkeypatch):
    from pkbsim.screen.candidate import _rank_private_modules
    root = tmp_path / "checkout"
    (root / "helpers_tk").mkdir(parents=True)
    (root / "solutions").mkdir()
    (root / "helpers_tk" / "__init__.py").write_text("")
    (root / "helpers_tk" / "cache.py").write_text("STATE = {}\n")
    monkeypatch.syspath_prepend(str(root))
    import helpers_tk.cache as shared
    cand = str(root / "solutions" / "1_x.py")
    got = []
    for _ in range(2):
        with _rank_private_modules(cand):
            import helpers_tk.cache as mine
            got.append(mine)
    assert got[0] is not got[1] and shared not in got
    assert sys.modules["helpers_tk.cache"] is shared      # what was loaded before stays
    with _rank_private_modules(str(tmp_path / "elsewhere" / "sub" / "c.py")):
        import helpers_tk.cache as same
    assert same is shared                                   # not the candidate's tree: shared


def test_a_unit_built_in_one_process_is_found_by_the_next_whose_cache_is_at_another_path(clean_env, monkeypatch,
                                                                                          tmp_path):
    """A candidate's process sees its own cache at a path of its own working directory (confinement.py): the
    same folder under another name in each of a screen's processes. Here one folder under two names."""
    monkeypatch.setenv("PKB_THUNDERKITTENS_ROOT", _fake_root(tmp_path))
    own = tmp_path / "by-candidate"
    own.mkdir()
    (tmp_path / "seen-by-the-sizes-stage").symlink_to(own)
    built = []

    def compile_(name, tu, flags, nvcc, rt, out_dir, origin, host):
        built.append(out_dir)
        os.makedirs(out_dir)
        open(os.path.join(out_dir, f"{name}.so"), "w").close()
    monkeypatch.setattr(build, "_compile", compile_)
    monkeypatch.setattr(build, "runtime_dir", lambda: "/pkb-runtime")
    monkeypatch.setattr(build.driver, "digest", lambda: "driver")
    for seen in ("by-candidate", "seen-by-the-sizes-stage"):
        monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path / seen))
        so, _ = build.build("tk_ext", TU, [], [], "cand.py")
        assert os.path.isfile(so) and str(tmp_path / seen) in so
    assert len(built) == 1, built   # one build; the second process found it
    # its twin: another unit is another key, built again
    build.build("tk_ext", TU + "void g() {}\n", [], [], "cand.py")
    assert len(built) == 2
