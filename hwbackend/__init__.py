"""hwbackend: the authoritative score of a candidate on real GPUs (NCCL) or the CPU (gloo).

A trusted scorer runs reference and candidate under torchrun in separate process sessions, checks
correctness on fresh secret-seeded inputs, times both from its own clock and records everything in the
store it is handed (the shell's results file).

The map (docs/layout.md has every module):
  score.py        the trusted scorer: score(ScoreRequest, Protocol, ScoreOptions) -> ScoreResult (here
                  score_candidate: `hwbackend.score` is the module)
  result.py       what a score concludes (ScoreResult, Status, Finding) and the store's summary of a run (RunRecord)
  defaults.py     the scorer's defaults, named once (the commands' argument parsers read them without torch)
  job_spec.py, jobs.py, worker.py, guard.py, timing.py, batch_size.py, clock_check.py, failures.py
                  one torchrun job, a rank, the integrity probes bound before the candidate is imported, the
                  timing statistics, what a failure's text says
  recorder.py     what the scorer records a score into (Recorder), handed in by the shell, whose store module
                  (pkb/store.py) owns the results file and the candidate hash; leaderboard.py aggregates the
                  stored runs per label
  across nodes:   rendezvous.py, cluster.py (node 0), node_agent.py (the other nodes), cluster_job.py,
                  spread_job.py; slurm.py writes and submits an sbatch script; calibrate.py measures a node

This module is the library's front door: the names below are what the shell (pkb/) uses, and the shell
imports hwbackend only from here (tests/test_layering.py). Each name is imported when first used (frontdoor/),
so the commands' parsers read the defaults without loading torch or the scorer.
"""
from __future__ import annotations

from functools import partial

from frontdoor import FrontDoor

_door = FrontDoor("hwbackend")
_export = _door.export

_export("hwbackend.defaults", "TRIALS LAUNCHES BATCHES GRAPH_BATCHES CALLS JOB_TIMEOUT_S GLOO_MAX_RANKS GLOO_RANKS_PER_CORE "
                              "SLURM_PORT SLURM_JOB_NAME")
_export("hwbackend.score", "Protocol ScoreOptions ScoreRequest gloo_rank_bound", score_candidate="score")
_export("hwbackend.job_spec", "default_preset")
_export("hwbackend.result", "RUNNING Finding RunRecord ScoreResult Status")
_export("hwbackend.leaderboard", "FAST_P aggregate")
_export("hwbackend.rendezvous", "EndpointError Rendezvous parse_endpoint")
_export("hwbackend.cluster", "Cluster")
_export("hwbackend.node_agent", "", serve_node="serve")
_export("hwbackend.slurm", "SlurmError SlurmPlan sbatch_script", submit_sbatch="submit")

__all__ = _door.names()
__getattr__ = _door.getattr
__dir__ = partial(_door.dir, globals())
