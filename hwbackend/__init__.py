"""Real-GPU scoring: a trusted scorer runs reference and candidate under torchrun in separate process
sessions, checks correctness on fresh secret-seeded inputs, times them from its own clock and records
everything in SQLite. Public entry points: `score` (score.py) and `leaderboard` (leaderboard.py)."""
