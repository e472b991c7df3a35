"""Real-GPU scoring (torchrun launcher, worker, timing, integrity). Not built yet: see issue 7."""
