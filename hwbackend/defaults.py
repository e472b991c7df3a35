"""The scorer's defaults, named once: hwbackend/score.py's Protocol, hwbackend/slurm.py's SlurmPlan and the
`pkb score` and `pkb slurm` commands read them here (a module without imports, so a command's argument
parser loads neither torch nor the scorer)."""
TRIALS = 3              # correctness trials with fresh inputs, on the first launch
LAUNCHES = 2            # launches of each job (candidate and reference alternating)
BATCHES = 8             # timed batches per launch
# the same under CUDA graphs (`pkb score --graphs`): a replayed batch varied by 1-2% where eager ones by 5-50%, and each
# costs its inputs' fill (0.9 s for 4601 calls on an H200), so half as many keep a score's wall time near the eager one's
GRAPH_BATCHES = 4
CALLS = 0               # timed calls per batch; 0: as many as make a batch long (hwbackend/batch_size.py)
WARMUP = 10             # warm-up calls per launch: the first alone, the others as one timed batch
JOB_TIMEOUT_S = 300.0   # wall-clock limit per scoring job (and for the other nodes to join)
SLURM_PORT = 29400      # `pkb slurm`: rendezvous port of the first job step (step i: port + i)
SLURM_JOB_NAME = "pkb-score"  # `pkb slurm`: the Slurm job's name
GLOO_MAX_RANKS = 64     # `pkb score --backend gloo`: ranks per node at most, and at most this many per CPU core:
GLOO_RANKS_PER_CORE = 4  # each rank is a process with its own copy of torch (~0.3 GiB)
