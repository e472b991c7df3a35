"""torch.compile's stance on simulated ranks is set without importing torch._dynamo up front (compile_shim.py):
importing it cost about a second of every world start, in the screening process and again in the candidate's,
and most programs never compile. Each case runs in a fresh interpreter, where nothing imported dynamo before."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import in_fresh_interpreter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DRIVER = """
import io, json, sys, tempfile, os
from pkbsim.world.launcher import RunOptions, run_script
path = os.path.join(tempfile.mkdtemp(), "prog.py")
open(path, "w").write(sys.argv[1])
res = run_script(path, [], RunOptions(nproc=2, timeout=300, output=io.StringIO(), pin_core=None))
from torch._dynamo import eval_frame   # after the run: the stance it left behind
print(json.dumps({"verdict": res.verdict, "findings": [f.render() for f in res.findings],
                  "dynamo_imported_by_run": RAN_WITH_DYNAMO, "stance_after": eval_frame._stance.stance}))
"""


def _run(program: str) -> dict:
    driver = DRIVER.replace("RAN_WITH_DYNAMO", "_imported")
    # whether the run imported dynamo is read before the driver's own import of it
    driver = driver.replace("from torch._dynamo import eval_frame   #",
                            "_imported = 'torch._dynamo' in sys.modules\nfrom torch._dynamo import eval_frame   #")
    return in_fresh_interpreter(driver, program)


PLAIN = """
    import os, torch, torch.distributed as dist
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    x = torch.ones(4, device="cuda")
    dist.all_reduce(x)
    assert x[0].item() == 2
"""

COMPILED = """
    import os, torch, torch.distributed as dist
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    calls = []

    def step(x):
        calls.append(1)          # a side effect dynamo would trace away once compiled; eager runs it every call
        return x * 2

    f = torch.compile(step)
    from torch._dynamo import eval_frame
    assert eval_frame._stance.stance == "force_eager", eval_frame._stance.stance
    x = torch.ones(4, device="cuda")
    for _ in range(3):
        x = f(x)
    assert len(calls) == 3, calls
    dist.all_reduce(x)
    assert x[0].item() == 16
"""


def test_a_world_that_never_compiles_does_not_import_dynamo():
    res = _run(PLAIN)
    assert res["verdict"] == "ok", res["findings"]
    assert res["dynamo_imported_by_run"] is False
    assert res["stance_after"] == "default"


def test_a_program_that_compiles_runs_eagerly_and_the_stance_is_restored():
    """The honest twin: dynamo imported by the program itself during the run gets the force_eager stance
    before torch.compile uses it, and the process's own stance is back after the run."""
    res = _run(COMPILED)
    assert res["verdict"] == "ok", res["findings"]
    assert res["dynamo_imported_by_run"] is True
    assert res["stance_after"] == "default"


SCREEN_CALL = """
import json, sys
from pkbsim.taskrun import run_task
from tasks.registry import get
run = run_task(get("all_reduce"), None, 2, poison=True, record_compute=True)
print(json.dumps({"verdict": run.result.verdict, "dynamo_imported_by_run": "torch._dynamo" in sys.modules}))
"""


def test_a_screen_call_under_pkb_dispatch_modes_does_not_import_dynamo():
    """torch wraps a TorchDispatchMode's __torch_dispatch__ in dynamo.disable unless the mode opts out, and the
    wrapper imports torch._dynamo at its first op: pkb's own modes (the rank's ops mode, the poisoned-allocation
    fill, ParallelKernelBench's input and FLOP budgets) opt out, since nothing compiles on simulated ranks."""
    proc = subprocess.run([sys.executable, "-c", SCREEN_CALL], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res == {"verdict": "ok", "dynamo_imported_by_run": False}
