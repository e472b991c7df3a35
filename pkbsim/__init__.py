"""pkbsim: every rank of a multi-GPU program run on a CPU, on a model of the machine.

The map (docs/layout.md has every module):
  world/    the simulated world's engine: ranks as threads, one wait-for check (a deadlock ends in a report,
            never a hang), NCCL's matching rules, the "sim" process group, the ops mode that sees every tensor
            op; `pkb check` and the pytest marker run scripts on it (check_script, check_ranks)
  standins/ torch and the process as a rank sees them: CUDA on the CPU, torch.distributed's and Python's
            per-process state per rank, torch.compile, DTensor, autocast
  symm/, device/, cuda/   the world's plug-ins (registered by install_plugins): symmetric memory, device-side
            communication in Triton kernels, inline CUDA; ptx/ the PTX interpreter inline CUDA runs on
  timing/   topologies (topologies/*.toml), NCCL's models, the flow model, replay of a trace: predicted times;
            the cost rules of torch ops (op_kernels, kernel_path, op_bytes, fused_calls, reuse)
  screen/   one candidate judged without a GPU in stages (static, functional, cost): ScreenResult with a
            Verdict (pass, reject, inconclusive), the stage it ended at and its reasons
  taskrun.py, taskcheck.py   tasks (tasks/) on the simulated world; `pkb tasks validate`

This module is the library's front door: the names below are what the shell (pkb/) uses, and the shell
imports pkbsim only from here (tests/test_layering.py). Each name is imported when first used (frontdoor/),
so `from pkbsim import ScreenResult` loads the screen's result types and not torch; the heavy ones (the
world, the screen's pipeline) are imported by the shell where a command needs them.
"""
from __future__ import annotations

import importlib
import os
from functools import partial

from frontdoor import FrontDoor

_door = FrontDoor("pkbsim")
_export = _door.export

# screen/: verdicts and their reasons (light: no torch), the screen's defaults, the screen itself
_export("pkbsim.screen.result", "EndedBy Reason ReasonKind ScreenResult Semantics Stage Verdict")
_export("pkbsim.screen.defaults", "MARGIN MEMORY_GB RUN_TIMEOUT_S SIZES_SECONDS TIME_LIMIT_S")
_export("pkbsim.screen.limits", "memory_cap")
_export("pkbsim.screen.pipeline", "ScreenOptions", screen_candidate="screen")
_export("pkbsim.screen.functional", "ReferenceFailed")
_export("pkbsim.screen.isolation", "Zygote ZygoteGone")
_export("pkbsim.screen.parallelkernelbench", "register_parallelkernelbench_tasks")
# world/: scripts on simulated ranks (`pkb check`, the pytest marker, the corpus)
_export("pkbsim.world.check", "check_ranks check_script")
_export("pkbsim.world.launcher", "RunOptions ScriptError error_finding")
_export("pkbsim.world.trace", "write_trace")
_export("pkbsim.world.findings", "", CHECK_EXIT_CODES="EXIT_CODES")
# timing/: machines and predicted times
_export("pkbsim.timing.topology", "TopologyError list_topologies load_topology")
_export("pkbsim.timing.nccl", "CUSTOM_ALGOS NCCL_ALGOS OPS PROTOCOLS")
_export("pkbsim.timing.predict", "predict")
_export("pkbsim.timing.units", "format_size parse_size")
_export("pkbsim.timing.replay", "Replay")
_export("pkbsim.timing.chrome_trace", "", write_chrome_trace="write")
_export("pkbsim.timing.describe", "", topology_lines="lines", topology_plot="plot", topology_summary="summary")
_export("pkbsim.timing.fidelity", "", evaluate_model="evaluate")
# tasks on the simulated world
_export("pkbsim.taskcheck", "", validate_task="validate")

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples")  # `pkb check --demo`'s programs


def install_plugins() -> None:
    """Register the world's plug-ins (symmetric memory, Triton kernels, inline CUDA) in this process, as every
    entry point that runs programs on the world does first (`pkb check`, the pytest marker, the task runner)."""
    importlib.import_module("pkbsim.plugins")


__all__ = _door.names("EXAMPLES_DIR", "install_plugins")
__getattr__ = _door.getattr
__dir__ = partial(_door.dir, globals())
