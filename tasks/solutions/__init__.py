"""Known-good optimized candidates, one module per task (`<task slug>.py`, defining `solution`).

They are the pipeline's positive controls and worked examples: each replaces the task's NCCL
reference with torch symmetric memory (one-shot/two-shot all-reduce, direct peer reads and writes,
fused all-gather/reduce-scatter GEMMs) and states in its docstring the speed-up it should reach on an
8-GPU H100/H200 node and why. This package is not a task category: the registry walks only
tasks/<category>/, so nothing here is mistaken for a task. `tests/test_solutions.py` checks every
module against its task on the simulated world.
"""
