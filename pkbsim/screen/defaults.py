"""The screen's defaults, named once: its options, the commands and the refinement loop read them here
(a module without imports, so a command's argument parser does not load the simulator)."""
MARGIN = 0.8           # reject when the predicted speed-up is below this (and the prediction is certain)
RUN_TIMEOUT_S = 120.0  # wall-clock limit per simulated run
