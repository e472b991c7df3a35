"""Fused compute + communication tasks from tensor/sequence-parallel training and RL post-training."""
