"""Exploit class: a candidate that plants a build in pkb's shared build cache (a PTX file, an extension, pkb's own
stand-in libraries) under the content hash of another candidate, or rewrites an entry already there, so that
a later screen uses its build. Inside the sandbox the cache is a private tmpfs with the machine's entries
bound in read-only (candidate_sandbox._private_cache): an entry planted inside is gone when the sandbox ends,
and an existing entry cannot be changed. Shown with the PTX cache and nvcc (pkbsim.ptx.compile): a planter
writes bogus PTX at the key of a victim's source; a second sandbox compiling the victim gets the real PTX; the
twin, the same two steps outside the sandbox, gets the planted one. The honest twin inside: a build works and
an entry the machine's cache already holds is read."""
import os
import subprocess
import sys

import pytest

import candidate_sandbox as sandbox
from pkbsim.ptx.compile import find_nvcc

VICTIM = "__global__ void victim(float* x) { x[threadIdx.x] += 1.0f; }\n"
PLANT = f'''
import hashlib, os
from pkbsim.ptx.compile import BASE_FLAGS, TORCH_FLAGS, cache_dir, find_nvcc, nvcc_version
source = {VICTIM!r}
key = hashlib.sha256("\\0".join((nvcc_version(find_nvcc()), "kernel.cu", *BASE_FLAGS, *TORCH_FLAGS, source)).encode()).hexdigest()
os.makedirs(cache_dir(), exist_ok=True)
with open(os.path.join(cache_dir(), key[:32] + ".ptx"), "w") as f:
    f.write("// PLANTED")
print("planted")
'''
COMPILE = f'''
from pkbsim.ptx.compile import compile_to_ptx
ptx = compile_to_ptx({VICTIM!r})
print("PLANTED" if "PLANTED" in ptx else ("real" if ".entry" in ptx else "other"))
'''

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    path.mkdir()
    monkeypatch.setenv("PKB_CACHE_DIR", str(path))
    return str(path)


def _run(code: str, cache: str, sandboxed: bool = True) -> str:
    cmd = [*(sandbox.prefix([cache]) if sandboxed else []), sys.executable, "-c", code]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@needs_nvcc
def test_a_build_planted_inside_is_not_used_by_the_next_sandbox(cache):
    assert _run(PLANT, cache) == "planted"
    assert not os.listdir(cache), "the planted entry reached the machine's cache"
    assert _run(COMPILE, cache) == "real"
    assert not os.listdir(cache)  # and the honest build made inside stayed inside too


@needs_nvcc
def test_the_twin_outside_the_sandbox_uses_the_planted_build(cache):
    assert _run(PLANT, cache, sandboxed=False) == "planted"
    assert _run(COMPILE, cache, sandboxed=False) == "PLANTED"


def test_an_entry_of_the_machines_cache_is_read_inside_and_cannot_be_changed(cache):
    entry = os.path.join(cache, "cuda-rt", "0123abcd")
    os.makedirs(entry)
    with open(os.path.join(entry, "libcudart.so.13"), "w") as f:
        f.write("honest")
    code = f'''
import os, shutil
entry = {entry!r}
with open(os.path.join(entry, "libcudart.so.13")) as f:
    print(f.read())
for attempt in (lambda: open(os.path.join(entry, "libcudart.so.13"), "w").write("planted"),
                lambda: os.remove(os.path.join(entry, "libcudart.so.13")),
                lambda: shutil.rmtree(entry), lambda: os.rename(entry, entry + "-old"),
                lambda: open(os.path.join(entry, "extra.so"), "w")):
    try:
        attempt()
        print("changed")
    except OSError:
        pass
os.makedirs(os.path.join(os.path.dirname(entry), "fresh"))  # a new entry of its own is fine, and private
print("built")
'''
    assert _run(code, cache).splitlines() == ["honest", "built"]
    with open(os.path.join(entry, "libcudart.so.13")) as f:
        assert f.read() == "honest"
    assert sorted(os.listdir(cache)) == ["cuda-rt"] and os.listdir(os.path.join(cache, "cuda-rt")) == ["0123abcd"]


def test_what_a_sandbox_writes_in_its_cache_counts_as_its_memory(cache):
    # a private tmpfs: 1 GiB written there under a cap of 512 MiB is a breach, as in /tmp
    from candidate_sandbox.supervisor import BREACH_EXIT
    code = ("import os, time\np = os.path.join(os.environ['PKB_CACHE_DIR'], 'fill')\nwith open(p, 'wb') as f:\n"
            "    for _ in range(32):\n        f.write(b'x' * (32 << 20))\ntime.sleep(30)\n")
    cmd = [*sandbox.prefix([cache], limits=sandbox.Limits(memory_bytes=512 << 20)), sys.executable, "-c", code]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == BREACH_EXIT and "of resident memory, over the sandbox's cap" in proc.stderr, proc


def test_the_entries_bound_in_are_bounded_pkbs_own_first_then_the_newest(cache):
    own = os.path.join(cache, "cuda-rt", "0123abcd")
    os.makedirs(own)
    os.utime(own, (1, 1))  # the oldest of all, still bound: pkb's own build
    for i in range(sandbox.CACHE_BINDS + 10):
        path = os.path.join(cache, "cuda-ext", f"ext_{i:03d}")
        os.makedirs(path)
        os.utime(path, (1000 + i, 1000 + i))
    os.makedirs(os.path.join(cache, "cuda-ext", "ext_999.lock"))  # scratch: never bound
    args = sandbox.prefix([cache])
    bound = [args[i + 1] for i, a in enumerate(args) if a == "--ro-bind" and args[i + 1].startswith(cache + "/")]
    assert len(bound) == sandbox.CACHE_BINDS and own in bound
    assert sorted(os.path.basename(p) for p in bound if p != own) == [
        f"ext_{i:03d}" for i in range(11, sandbox.CACHE_BINDS + 10)]
