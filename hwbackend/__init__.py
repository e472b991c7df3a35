"""Real-GPU scoring: a trusted scorer runs reference and candidate under torchrun in separate process
sessions, checks correctness on fresh secret-seeded inputs, times them from its own clock and records
everything in SQLite. Public entry points: `score` (score.py; across nodes with a `Cluster` from
cluster.py on node 0 and `node_agent.serve` on the others), `leaderboard` (leaderboard.py) and
`sbatch_script` (slurm.py)."""
