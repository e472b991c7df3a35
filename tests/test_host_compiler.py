"""A split build's host unit is compiled by clang++ where it is installed, with a precompiled prelude that makes
the prelude's template instantiations once (pkbsim/cuda/host_header.py): g++'s precompiled header saves only the
parse, and every unit made the instantiations again. A unit clang++ refuses goes to g++ as before; the build's
cache key names the host compilers, so a build made by one is never taken for the other's."""
import os
import subprocess

import pytest

from pkbsim.cuda import build, host_header
from test_two_units import KERNEL, LAUNCH, needs_nvcc, unit

needs_clang = pytest.mark.skipif(host_header._clang() is None, reason="clang++ is not installed")


def _host_object(so: str) -> str:
    folder = os.path.dirname(so)
    return next(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith("_host.o"))


def _compiled_by(obj: str) -> str:
    """The compiler that made an object, from its .comment section ('clang version ...', 'GCC: ...')."""
    return subprocess.run(["readelf", "-p", ".comment", obj], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def no_clang(monkeypatch):
    host_header._clang.cache_clear()
    monkeypatch.setattr(host_header, "CLANG", ())
    yield
    host_header._clang.cache_clear()


def test_clang_first_only_where_its_header_is_built(monkeypatch, tmp_path):
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path))   # an empty cache: no header of either compiler
    monkeypatch.setattr(host_header, "_clang", lambda: "/usr/bin/clang++")
    assert [w.argv for w in host_header.host_compilers(True)] == [("g++",)]
    monkeypatch.setattr(host_header, "clang_precompiled", lambda build=True: "/cache/prelude.pch")
    ways = host_header.host_compilers(True)
    assert [w.argv for w in ways] == [("/usr/bin/clang++",), ("g++",)]
    assert ways[0].include == ("-include-pch", "/cache/prelude.pch")
    assert [w.argv for w in host_header.host_compilers(False)] == [("g++",)]   # all of torch: not precompiled


def test_the_build_key_names_the_host_compilers(monkeypatch, no_clang):
    without = host_header.identity()
    host_header._clang.cache_clear()
    monkeypatch.setattr(host_header, "CLANG", ("g++",))   # any other compiler found by that name
    assert host_header.identity() != without


@pytest.fixture(scope="module")
def clang_cache(tmp_path_factory):
    """A build cache holding clang++'s precompiled prelude (about 15 s to build), shared by the builds below."""
    root = str(tmp_path_factory.mktemp("clang_cache"))
    old = os.environ.get("PKB_CACHE_DIR")
    os.environ["PKB_CACHE_DIR"] = root
    try:
        assert host_header.clang_precompiled() is not None
    finally:
        if old is None:
            del os.environ["PKB_CACHE_DIR"]
        else:
            os.environ["PKB_CACHE_DIR"] = old
    return root


@pytest.mark.slow
@needs_nvcc
@needs_clang
def test_a_host_unit_is_built_by_clang_and_without_it_by_gcc_in_another_entry(clang_cache, monkeypatch):
    monkeypatch.setenv("PKB_CACHE_DIR", clang_cache)
    so, _ = build.build("pkb_host_clang", unit(KERNEL, LAUNCH), [], [], "/c/cand.py")
    assert "clang version" in _compiled_by(_host_object(so))
    host_header._clang.cache_clear()
    monkeypatch.setattr(host_header, "CLANG", ())
    try:
        so_gcc, _ = build.build("pkb_host_clang", unit(KERNEL, LAUNCH), [], [], "/c/cand.py")
    finally:
        host_header._clang.cache_clear()
    assert os.path.dirname(so_gcc) != os.path.dirname(so)   # not the clang build's entry
    assert "GCC" in _compiled_by(_host_object(so_gcc))


@pytest.mark.slow
@needs_nvcc
@needs_clang
def test_a_unit_clang_refuses_is_built_by_gcc(clang_cache, monkeypatch):
    # -std=c++20 from the candidate's flags: clang++ refuses its header made for C++17; g++ parses the prelude
    monkeypatch.setenv("PKB_CACHE_DIR", clang_cache)
    so, _ = build.build("pkb_host_clang_std", unit(KERNEL, LAUNCH), ["-std=c++20"], [], "/c/cand.py")
    assert "GCC" in _compiled_by(_host_object(so))
