"""Collective communication tasks: the NCCL collectives as out-of-place functions."""
