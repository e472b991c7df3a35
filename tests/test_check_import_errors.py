"""`pkb check` of a script whose local module fails to import: ranks are threads sharing sys.modules, yet
each rank must report the real cause, as its own process would, not the partial module another rank left."""
import json
import sys

import pytest

from pkb.cli.main import main

HELPER = """\
import time

time.sleep(0.05)  # other ranks reach `from helper import ...` while this one runs the module
{line}


class Trainer:
    pass
"""
SCRIPT = """\
import torch.distributed as dist

try:
    from helper import Trainer
except ImportError as e:
    print(f"import failed: {type(e).__name__}: {e}", flush=True)
    raise
dist.init_process_group("gloo")
dist.barrier()
print("imported", Trainer.__name__)
"""
RUNS, NPROC = 5, 4


@pytest.fixture(autouse=True)
def _fresh_helper():
    """A run leaves a module it imported in this process's sys.modules: each test imports its own helper."""
    sys.modules.pop("helper", None)
    yield
    sys.modules.pop("helper", None)


def _check(tmp_path, capsys, line: str):
    (tmp_path / "helper.py").write_text(HELPER.format(line=line))
    (tmp_path / "script.py").write_text(SCRIPT)
    code = main(["check", "--nproc-per-node", str(NPROC), "--json", str(tmp_path / "script.py")])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_every_rank_reports_the_missing_package(tmp_path, capsys):
    for _ in range(RUNS):
        code, doc, err = _check(tmp_path, capsys, "import package_that_does_not_exist_xyz  # noqa: F401")
        assert code == 4 and doc["verdict"] == "error", doc
        message = doc["findings"][0]["message"]
        assert "ModuleNotFoundError" in message and "package_that_does_not_exist_xyz" in message, message
        assert "cannot import name" not in err, err
        assert err.count("import failed: ModuleNotFoundError: No module named "
                         "'package_that_does_not_exist_xyz'") == NPROC, err


def test_a_helper_that_imports_passes(tmp_path, capsys):
    """The twin: the same script and helper, with a package that exists."""
    for _ in range(2):
        code, doc, err = _check(tmp_path, capsys, "import json  # noqa: F401")
        assert code == 0 and doc["verdict"] == "ok", doc["findings"]
        assert err.count("imported Trainer") == NPROC, err
