"""What torch and the process look like on a simulated rank: CUDA on the CPU, torch.distributed's and Python's
per-process state made per rank, torch.compile, DTensor and autocast as a GPU program expects them. Part of the
world's core (pkbsim/world), under its rule: no plug-in imported (tests/test_layering.py)."""
