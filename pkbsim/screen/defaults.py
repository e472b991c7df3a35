"""The screen's defaults, named once: its options, the commands and the refinement loop read them here
(a module that imports only the world's defaults, itself without imports, so a command's argument parser
does not load the simulator)."""
from pkbsim.world.defaults import RUN_TIMEOUT_S  # noqa: F401 - the world's, per simulated run (`pkb check`'s too)

MARGIN = 0.8           # reject when the predicted speed-up is below this (and the prediction is certain)
TIME_LIMIT_S = 600.0   # wall-clock limit per candidate's whole screen in a batch (`pkb run`, `pkb refine`)
MEMORY_GB = 12.0       # address-space limit per screening process
SIZES_SECONDS = 60.0   # the sizes stage's candidate runs, per screen (sizes.py: predicted before each run, cut at the end)
