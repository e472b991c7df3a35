"""Exploit class: a candidate that plants a build in another candidate's build cache. Builds made inside the
sandbox are kept per candidate file (so that a second screen of the same file does not build again), and
pkb's own stand-in runtime, built by the trusted side, is kept too; in the candidate's mount namespace the
whole build cache is read-only (every file's cache, the runtime's, the PTX and compile-check entries), its own
cache bound writable elsewhere, and every cache pkb's code writes in its process goes there. The
plants are refused and the victim's cache is left as it was. Twin: the same process writes into its own
cache, and that is kept for the next screen of the file."""
import json
import os
import subprocess
import sys

import pytest
from hostile import BOUND_S, PKB, path

from pkbsim.ptx.compile import find_nvcc
from pkbsim.screen.pipeline import own_cache


def test_a_candidate_sees_and_writes_its_own_build_cache_alone(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("PKB_CACHE_DIR", str(cache))
    victim = own_cache(path("honest_all_reduce.py"))   # the folder a victim's screen would use
    mine = own_cache(path("plant_other_cache.py"))
    proc = subprocess.run([*PKB, "screen", path("plant_other_cache.py"), "--task", "all_reduce", "--world-size", "2",
                           "--no-cost", "--json"], capture_output=True, text=True, timeout=BOUND_S,
                          env=dict(os.environ, PKB_PROBE_VICTIM_CACHE=victim))
    assert json.loads(proc.stdout)["verdict"] == "pass", proc.stdout
    assert "probe: plant refused" in proc.stderr, proc.stderr[-2000:]
    assert "probe: runtime refused" in proc.stderr, proc.stderr[-2000:]
    assert "probe: ptx refused" in proc.stderr and "probe: check refused" in proc.stderr, proc.stderr[-2000:]
    assert not os.path.exists(cache / "cuda-rt" / "planted")
    assert not os.path.exists(cache / "ptx" / "planted.ptx") and not os.path.exists(cache / "nvcc-check" / "planted.json")
    assert os.listdir(victim) == []
    assert "probe: own done" in proc.stderr and open(os.path.join(mine, "marker")).read() == "mine"


def _builds(folder: str) -> dict[str, float]:
    """Each built module in a per-candidate cache, with when it was written."""
    return {f"{entry}/{name}": os.stat(os.path.join(folder, entry, name)).st_mtime_ns
            for entry in os.listdir(folder) if os.path.isdir(os.path.join(folder, entry))
            for name in os.listdir(os.path.join(folder, entry)) if name.endswith(".so")}


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed: the file cannot be built")
def test_a_second_screen_of_the_same_file_finds_its_build(tmp_path, monkeypatch):
    # a build made inside the sandbox used to end with it: every screen of an inline-CUDA file was cold
    monkeypatch.setenv("PKB_CACHE_DIR", str(tmp_path / "cache"))
    candidate = os.path.join(os.path.dirname(path("x")), "..", "broken_candidates", "all_reduce__inline_cuda.py")
    folder = own_cache(candidate)
    verdicts, seen = [], []
    for _ in range(2):
        proc = subprocess.run([*PKB, "screen", candidate, "--task", "all_reduce", "--world-size", "2", "--no-cost",
                               "--json"], capture_output=True, text=True, timeout=BOUND_S)
        verdicts.append(json.loads(proc.stdout)["verdict"])
        seen.append(_builds(folder))
    assert verdicts == ["pass", "pass"]
    assert len(seen[0]) == 1 and seen[1] == seen[0]   # built once, then found (not rebuilt)


RUNTIME_PROBE = """
from pkbsim.cuda.runtime_libs import runtime_dir
from pkbsim.screen.limits import limit_of
try:
    runtime_dir()
    print("built")
except Exception as e:
    print("limit" if limit_of(e) else f"fault {type(e).__name__}")
"""


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed: the runtime is never built")
def test_a_runtime_build_the_screen_did_not_make_is_pkbs_limit_not_the_candidates(tmp_path):
    # a candidate that reaches load_inline through code the screen did not see mention it meets pkb's
    # runtime folder read-only (as its process sees it): inconclusive, never an error charged to it
    (tmp_path / "cuda-rt").mkdir()
    script = (f"mount -t tmpfs -o ro tmpfs {tmp_path}/cuda-rt && "
              f"PKB_CACHE_DIR={tmp_path} {sys.executable} -c '{RUNTIME_PROBE}'")
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 and "unshare" in proc.stderr:
        pytest.skip(f"no mount namespace here: {proc.stderr.strip()[-200:]}")
    assert proc.stdout.strip() == "limit", proc.stderr[-2000:]
