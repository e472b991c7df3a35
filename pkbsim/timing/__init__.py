"""Topology model and timing engine: how long communication and compute take on a real machine.

Machines are data (`topologies/*.toml`); NCCL's cost model gives the latency terms and the algorithm choice;
a SimPy flow network with max-min fair sharing gives the bandwidth terms when flows contend. Nothing here
needs torch, so predictions run anywhere numpy, networkx and simpy do.
"""
