"""Whole parallelism schemes: data, ZeRO/FSDP, tensor, expert, context and pipeline parallel steps."""
