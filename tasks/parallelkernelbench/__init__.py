"""ParallelKernelBench problems as tasks, loaded from a user's checkout at run time (never copied here).

`checkout` turns a checkout's problems into TaskSpecs that any process can run (a scoring rank on a GPU,
the simulator); `compare` judges outputs as PKB's harness does; `naming` holds PKB's names without torch
(its dtypes, the problem a solution file names: what `pkb score` needs to name its task). The simulator layers its budgets and
per-rank module instances on top (pkbsim/screen/parallelkernelbench.py).
"""
