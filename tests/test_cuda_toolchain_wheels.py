"""pkb's CUDA toolchain from the package index (`pip install -e '.[cuda]'`, issue 40): find_nvcc finds the
nvcc of NVIDIA's wheels (site-packages/nvidia/cu13/bin/nvcc) with no environment variable and no system
toolkit, a system toolkit still wins where both exist, and the sandbox shows the toolchain wherever it is
installed (one under /tmp was hidden by the sandbox's private /tmp). Each with its twin: no wheel, no
system nvcc, a folder under /tmp that is no toolchain. The real wheels compiling a kernel with the system
toolkit hidden: benchmarks/cuda_wheels_check.sh (docs/screening.md#a-cuda-toolchain-from-the-package-index)."""
import os
import subprocess
import sys

import pytest

import candidate_sandbox as sandbox
from pkbsim.ptx.compile import find_nvcc, wheel_nvcc


def _stub(path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho stub nvcc\n")
    path.chmod(0o755)
    return str(path)


def _wheel_site(root) -> tuple[str, str]:
    """A fake site-packages holding the nvidia-cuda-nvcc wheel's layout: (the site folder, its nvcc)."""
    site = root / "site-packages"
    return str(site), _stub(site / "nvidia" / "cu13" / "bin" / "nvcc")


@pytest.fixture
def no_configured_nvcc(tmp_path, monkeypatch):
    """No PKB_NVCC, no CUDA_HOME, no nvcc on PATH: only what find_nvcc's arguments name."""
    monkeypatch.delenv("PKB_NVCC", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_the_wheel_nvcc_is_found_when_no_system_toolkit_is(tmp_path, no_configured_nvcc):
    site, nvcc = _wheel_site(tmp_path)
    assert find_nvcc(system_homes=(), site_dirs=[site]) == nvcc


def test_twin_without_the_wheel_nothing_is_found(tmp_path, no_configured_nvcc):
    site = tmp_path / "site-packages"
    (site / "nvidia" / "cu13" / "bin").mkdir(parents=True)   # the namespace without the compiler's wheel
    assert find_nvcc(system_homes=(), site_dirs=[str(site)]) is None


def test_the_system_toolkit_wins_over_the_wheel(tmp_path, no_configured_nvcc):
    site, wheel = _wheel_site(tmp_path)
    system = _stub(tmp_path / "cuda" / "bin" / "nvcc")
    assert find_nvcc(system_homes=(str(tmp_path / "cuda"),), site_dirs=[site]) == system != wheel


def test_twin_a_system_home_without_nvcc_leaves_the_wheel(tmp_path, no_configured_nvcc):
    site, wheel = _wheel_site(tmp_path)
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    assert find_nvcc(system_homes=(str(tmp_path / "cuda"),), site_dirs=[site]) == wheel


def test_the_wheel_is_found_on_the_import_path_without_arguments(tmp_path, monkeypatch):
    """The default: the `nvidia` namespace package this interpreter imports (a venv, PYTHONPATH)."""
    site, nvcc = _wheel_site(tmp_path)
    assert wheel_nvcc() != nvcc
    monkeypatch.syspath_prepend(site)
    assert wheel_nvcc() == nvcc


def test_the_sandbox_shows_a_toolchain_under_tmp(tmp_path, monkeypatch):
    """A wheel toolchain on the import path and a PKB_NVCC toolkit, both under /tmp: visible inside."""
    site, wheel = _wheel_site(tmp_path)
    pinned = _stub(tmp_path / "toolkit" / "bin" / "nvcc")
    monkeypatch.syspath_prepend(site)
    monkeypatch.setenv("PKB_NVCC", pinned)
    assert wheel.startswith("/tmp/"), "the test is about a toolchain below the private /tmp"
    assert _visible_inside([wheel, pinned]) == [True, True]


def test_twin_the_sandbox_hides_a_folder_under_tmp_that_is_no_toolchain(tmp_path, monkeypatch):
    monkeypatch.delenv("PKB_NVCC", raising=False)
    other = _stub(tmp_path / "elsewhere" / "bin" / "nvcc")
    assert _visible_inside([other]) == [False]


def _visible_inside(paths: list[str]) -> list[bool]:
    code = "import os, sys; print(' '.join(str(os.access(p, os.X_OK)) for p in sys.argv[1:]))"
    proc = subprocess.run([*sandbox.prefix(), sys.executable, "-c", code, *paths], capture_output=True,
                          text=True, timeout=120, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0, proc.stderr
    return [w == "True" for w in proc.stdout.split()]
