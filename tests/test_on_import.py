"""A world patches third-party libraries (hydra's singletons, DTensor's loss-parallel table, dynamo's stance) only
once the program imports them (pkbsim/standins/on_import.py): importing them at every world start cost seconds in
each of a screen's processes (DTensor pulls in sympy). The world cases run in fresh interpreters, where nothing
imported those libraries before."""
from __future__ import annotations

import importlib
import os
import sys

import pytest

from pkbsim.standins import on_import
from pkbsim.standins.on_import import when_imported
from pkbsim.world.patching import Patches

from conftest import in_fresh_interpreter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("hydra", "torch.distributed.tensor", "sympy")

DRIVER = """
import io, json, sys, tempfile, os
from pkbsim.world.launcher import RunOptions, run_script
path = os.path.join(tempfile.mkdtemp(), "prog.py")
open(path, "w").write(sys.argv[1])
out = io.StringIO()
res = run_script(path, [], RunOptions(nproc=2, timeout=300, output=out, pin_core=None))
imported = [m for m in HEAVY if m in sys.modules]
after = {}
if "hydra" in sys.modules:   # the run's per-rank registry is gone again
    from hydra.core.singleton import Singleton
    after["hydra_instances"] = type(Singleton._instances).__name__
print(json.dumps({"verdict": res.verdict, "findings": [f.render() for f in res.findings], "imported": imported,
                  "done": out.getvalue().count("done"), **after}))
"""


def _run(program: str) -> dict:
    return in_fresh_interpreter(DRIVER.replace("HEAVY", repr(HEAVY)), program)


PLAIN = """
    import os, torch, torch.distributed as dist
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    x = torch.ones(4, device="cuda")
    dist.all_reduce(x)
    assert x[0].item() == 2
    print("done")
"""

HYDRA = """
    import os, torch, torch.distributed as dist
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    from hydra.core.global_hydra import GlobalHydra
    from hydra import initialize
    with initialize(version_base=None, config_path=None):   # rank 1 would find rank 0's without the patch
        assert GlobalHydra.instance().is_initialized()
        dist.barrier()
    print("done")
"""

LOSS_PARALLEL = """
    import os, torch, torch.distributed as dist
    import torch.nn.functional as F
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard
    from torch.distributed.tensor.parallel import loss_parallel
    mesh = init_device_mesh("cuda", (2,))
    torch.manual_seed(0)
    logits = torch.randn(4, 8, device="cuda", requires_grad=True)
    labels = torch.randint(0, 8, (4,), device="cuda")
    want = F.cross_entropy(logits, labels)
    with loss_parallel():
        dist.barrier()         # every rank is inside before any leaves: the second out found the table empty
        loss = F.cross_entropy(distribute_tensor(logits, mesh, [Shard(1)]), labels)
        loss.backward()
        dist.barrier()
    assert torch.allclose(loss.full_tensor(), want), (loss, want)
    print("done")
"""


def test_a_world_whose_program_imports_none_of_them_does_not_import_them():
    res = _run(PLAIN)
    assert res["verdict"] == "ok", res["findings"]
    assert res["imported"] == []


@pytest.mark.parametrize("program, imports", [(HYDRA, "hydra"), (LOSS_PARALLEL, "torch.distributed.tensor")])
def test_a_library_the_program_imports_during_the_run_is_patched(program, imports):
    """The twins: imported by the program inside the run, hydra's registry is per rank and loss_parallel nests
    across ranks, as when they were imported before the run (tests/test_torch_programs.py has the failing twins
    with the patches left out); the patches go with the run."""
    if imports == "hydra":
        pytest.importorskip("hydra")
    res = _run(program)
    assert res["verdict"] == "ok", res["findings"]
    assert res["done"] == 2
    assert imports in res["imported"]
    if imports == "hydra":
        assert res["hydra_instances"] == "dict"


def test_when_imported_patches_on_import_during_the_run_only(tmp_path, monkeypatch):
    """Called at once for a module already imported; for one not yet imported, after its code runs; and once the
    run's patches are restored, a later import is left alone."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "pkb_lazy_probe.py").write_text("VALUE = 1\n")
    seen = []
    patches = Patches()
    when_imported(patches, "pkb_lazy_probe", lambda m: (seen.append(m.VALUE), patches.set(m, "VALUE", 2)))
    assert seen == []
    mod = importlib.import_module("pkb_lazy_probe")
    assert seen == [1] and mod.VALUE == 2
    when_imported(patches, "pkb_lazy_probe", lambda m: seen.append("again"))   # imported: at once
    assert seen == [1, "again"]
    patches.restore()
    assert mod.VALUE == 1 and "pkb_lazy_probe" not in on_import._ON_IMPORT.pending
    del sys.modules["pkb_lazy_probe"]
    importlib.import_module("pkb_lazy_probe")   # outside the run: nothing called
    assert seen == [1, "again"]
    del sys.modules["pkb_lazy_probe"]
