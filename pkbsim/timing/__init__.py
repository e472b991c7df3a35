"""Topology model and timing engine: how long communication and compute take on a real machine.

Machines are data (`topologies/*.toml`); NCCL's cost model gives the latency terms and the algorithm choice;
a SimPy flow network with max-min fair sharing gives the bandwidth terms when flows contend. None of that
needs torch, so predictions run anywhere numpy, networkx and simpy do. The cost rules of torch ops
(op_kernels, kernel_path, op_bytes, fused_calls, reuse) read tensors: the world's ops mode loads them.
"""
