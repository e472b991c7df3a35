"""Attack: plant a build in another candidate's build cache (pkb keeps one per candidate file, for later
screens of the same file), or in pkb's own stand-in runtime's folder (every inline-CUDA candidate loads it), or a PTX or compile-check
entry in the machine's cache (a later candidate of the same worker would read it). The victim's folder is named by its content's hash, which anyone holding the
victim's file can compute; the test hands it over in PKB_PROBE_VICTIM_CACHE. The file also writes a marker
into its own cache (PKB_EXTENSION_CACHE: where pkb puts its builds) to show that one is writable and kept.
Outcomes go to descriptor 2. It mentions load_inline (here, in this line), which is what gives a file its cache."""
import os

import torch.distributed as dist


def _try(what, attempt):
    try:
        attempt()
        os.write(2, f"probe: {what} done\n".encode())
    except OSError as e:
        os.write(2, f"probe: {what} refused ({e.strerror})\n".encode())


_victim = os.environ.get("PKB_PROBE_VICTIM_CACHE", "")
_own = os.environ.get("PKB_EXTENSION_CACHE", "")
if _victim:
    _try("plant", lambda: open(os.path.join(_victim, "planted.so"), "w").write("bogus"))
    # the machine's cache (its process's own PKB_CACHE_DIR is its own cache; the root is no secret)
    _root = os.environ.get("PKB_TRUSTED_CACHE") or os.environ.get("PKB_CACHE_DIR", "/nonexistent")
    _try("runtime", lambda: open(os.path.join(_root, "cuda-rt", "planted"), "w").write("bogus"))

    def _plant_shared(kind, name):   # a PTX or compile-check entry a later candidate of the worker would read
        os.makedirs(os.path.join(_root, kind), exist_ok=True)
        open(os.path.join(_root, kind, name), "w").write("bogus")
    _try("ptx", lambda: _plant_shared("ptx", "planted.ptx"))
    _try("check", lambda: _plant_shared("nvcc-check", "planted.json"))
if _own:
    _try("own", lambda: open(os.path.join(_own, "marker"), "w").write("mine"))


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
