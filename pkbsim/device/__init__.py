"""Device-side communication in the simulated world.

Triton kernels run under Triton's CPU interpreter on each rank's thread (`triton_launch`,
`triton_memory`); symmetric-memory host calls and ops are lowered (`lower_symm`); both feed one protocol
IR (`ir`) whose events drive the happens-before race detector (`races`) and the spin-wait blocking that
joins the world's deadlock check (`spin`).
"""
