"""pkb's FLOP formulas come without importing triton (pkbsim/world/flop_formulas.py): the screen's pipeline leaves
triton to the programs that import it, which still get it whole."""
import importlib.util
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")


def _fresh(code: str) -> str:
    """stdout of `code` in a fresh interpreter (this process may have imported triton already)."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


def test_the_screens_pipeline_imports_no_triton():
    assert _fresh("import sys, pkbsim.screen.pipeline; print('triton' in sys.modules)") == ["False"]


def test_a_program_that_imports_triton_afterwards_gets_it_and_the_formulas_are_torchs():
    out = _fresh("import sys, pkbsim.world.flop_formulas as f, torch.utils.flop_counter as fc\n"
                 "import triton, triton.language as tl\n"
                 "print(f.flop_registry is fc.flop_registry, len(f.flop_registry) > 20, callable(triton.jit),"
                 " hasattr(tl, 'program_id'))")
    assert out == ["True", "True", "True", "True"]


def test_where_triton_was_imported_first_nothing_is_hidden():
    out = _fresh("import triton, pkbsim.world.flop_formulas, torch.utils.flop_counter as fc\n"
                 "print(fc._JITFunction is triton.runtime.jit.JITFunction)")
    assert out == ["True"]
