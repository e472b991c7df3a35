"""Inline-CUDA extensions on simulated ranks.

A candidate's `load_inline` extension is built for the CPU: host code against torch's CPU library and
small stand-ins for the CUDA runtime and c10's CUDA symbols (runtime/), device code to PTX only
(build.py). Every kernel launch then arrives in Python (launch.py) and runs on the PTX interpreter in
the launching rank's simulated world, where its memory accesses feed the protocol IR
(pkbsim.device.ptx_memory, pkbsim.device.ptx_launch).
"""
