"""The simulated world's own defaults, named once (no imports: a command's argument parser reads them
through pkbsim/screen/defaults.py without loading the world)."""
RUN_TIMEOUT_S = 120.0  # wall-clock limit per simulated run: RunOptions, taskrun.py, `pkb check`, the screen
