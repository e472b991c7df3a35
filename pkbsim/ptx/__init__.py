"""A PTX interpreter: CUDA kernels compiled with nvcc run on the CPU over torch CPU tensors.

    mod = compile_cuda(source)                       # nvcc -> PTX, cached by content hash
    mod.launch("saxpy", grid=4, block=256, args=(2.0, x, y, n))

Unsupported instructions raise NotSimulated("not simulated: <instr> at <file:line>").
"""
from .compile import find_nvcc
from .errors import CompileError, KernelHang, MemoryFault, NotSimulated, PtxError
from .memory import AddressSpace, MulticastRegion, Region
from .module import Module, compile_cuda, load_ptx

__all__ = ["AddressSpace", "CompileError", "KernelHang", "MemoryFault", "Module", "MulticastRegion",
           "NotSimulated", "PtxError", "Region", "compile_cuda", "find_nvcc", "load_ptx"]
