"""Public entry points: compile CUDA (or take PTX), then launch kernels on torch CPU tensors."""
from __future__ import annotations

import struct

import numpy as np

from .compile import compile_to_ptx
from .dtypes import carrier
from .errors import PtxError
from .kernel import Kernel
from .memory import AddressSpace, Region
from .parser import parse
from .scheduler import Counters, run_grid


class Launch:
    """Everything one kernel launch shares across its CTAs."""

    def __init__(self, grid, block, shared_bytes, memory, param_bytes, counters, observer=None):
        self.grid, self.block, self.shared_bytes = grid, block, shared_bytes
        self.observer = observer  # sees global accesses and fences (see ops_memory)
        self.memory, self.param_bytes, self.counters = memory, param_bytes, counters
        self.param_region = Region(0, np.frombuffer(bytearray(param_bytes or b"\0"), np.uint8), "kernel parameters")


def _dim3(v, what: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, int) else tuple(v)
    if not 1 <= len(t) <= 3 or any((not isinstance(x, int)) or x < 1 for x in t):
        raise PtxError(f"{what} must be a positive int or a tuple of up to 3 positive ints, got {v!r}")
    return t + (1,) * (3 - len(t))


class Module:
    """A compiled translation unit: its kernels and module-scope (`__device__`/`__constant__`) memory."""

    def __init__(self, ptx: str, name: str = "kernel.cu"):
        self.ptx, self.name = ptx, name
        self.program = parse(ptx, {name})
        self.memory = AddressSpace()
        self.symbols: dict[str, int] = {}
        self._buffers = {}
        for var in self.program.globals:
            if var.space == "shared":
                continue
            buf = np.zeros(max(var.size, 1) + 64, np.uint8)
            start = (-buf.ctypes.data) % 64
            data = buf[start:start + max(var.size, 1)]
            if var.init:
                data[: len(var.init)] = np.frombuffer(var.init, np.uint8)
            region = Region.of_array(data, var.name)
            self.memory.add(region)
            self.symbols[var.name] = region.base
            self._buffers[var.name] = (buf, data)
        self._module_shared = [v for v in self.program.globals if v.space == "shared"]
        self._kernels: dict[str, Kernel] = {}
        self.counters = Counters()

    @property
    def kernel_names(self) -> list[str]:
        return [f.name for f in self.program.functions.values() if f.is_entry]

    def kernel(self, name: str) -> Kernel:
        if name not in self._kernels:
            fn = self.program.functions.get(name)
            if fn is None:
                known = ", ".join(self.kernel_names) or "none"
                raise PtxError(f"no kernel named {name!r} in {self.name} (kernels: {known}; "
                               "declare it extern \"C\" or use its mangled name)")
            self._kernels[name] = Kernel(fn, self.symbols, self._module_shared, self.program.functions)
        return self._kernels[name]

    def global_array(self, name: str) -> np.ndarray:
        """The bytes of a `__device__`/`__constant__` variable (read or write them between launches)."""
        return self._buffers[name][1]

    def launch(self, kernel_name: str, grid, block, args, shared_bytes: int = 0, *,
               memory: AddressSpace | None = None, lanes_per_group: int = 4096,
               max_warp_instructions: int = 1 << 31) -> Counters:
        """Run `kernel_name<<<grid, block, shared_bytes>>>(*args)`; tensors are CPU torch tensors."""
        space = memory if memory is not None else AddressSpace()
        params = self.pack_params(kernel_name, args, space)
        return self.launch_raw(kernel_name, grid, block, params, shared_bytes, memory=space,
                               lanes_per_group=lanes_per_group, max_warp_instructions=max_warp_instructions)

    def launch_raw(self, kernel_name: str, grid, block, params: bytes, shared_bytes: int = 0, *,
                   memory: AddressSpace, lanes_per_group: int = 4096,
                   max_warp_instructions: int = 1 << 31, observer=None, schedule=None) -> Counters:
        """Launch with an already packed parameter buffer whose pointers `memory` maps (the form a
        launch intercepted from a compiled extension arrives in). The multi-rank world passes an
        `observer` of memory accesses and its own `schedule(kernel, launch)` of the CTAs."""
        k = self.kernel(kernel_name)
        grid, block = _dim3(grid, "grid"), _dim3(block, "block")
        if block[0] * block[1] * block[2] > 1024:
            raise PtxError(f"block {block} has more than 1024 threads")
        if len(params) != k.param_size:
            raise PtxError(f"{kernel_name} takes {k.param_size} bytes of parameters, got {len(params)}")
        for region in self.memory.regions:   # module globals are visible in every address space
            memory.add(region)
        space, counters = memory, Counters()
        launch = Launch(grid, block, shared_bytes, space, params, counters, observer)
        with np.errstate(all="ignore"):
            if schedule is not None:
                schedule(k, launch)
            else:
                run_grid(k, launch, lanes_per_group=lanes_per_group, max_warp_instructions=max_warp_instructions)
        self.counters.warp_instructions += counters.warp_instructions
        return counters

    def pack_params(self, kernel_name: str, args, space: AddressSpace | None = None) -> bytes:
        """The kernel's parameter buffer for `args` (CPU tensors are mapped into `space`; ints pass as
        raw pointers), laid out as the driver's CU_LAUNCH_PARAM_BUFFER_POINTER expects."""
        k = self.kernel(kernel_name)
        space = space if space is not None else AddressSpace()
        layout = k.param_layout
        if len(args) != len(layout):
            raise PtxError(f"{k.name} takes {len(layout)} arguments, got {len(args)}")
        buf = bytearray(k.param_size)
        for i, (arg, (var, off)) in enumerate(zip(args, layout)):
            buf[off:off + var.size] = _encode_arg(arg, var, i, k.name, space)
        return bytes(buf)


def _encode_arg(arg, var, i, kname, space) -> bytes:
    import torch

    if isinstance(arg, torch.Tensor):
        if arg.device.type != "cpu":
            raise PtxError(f"argument {i} of {kname} is on {arg.device}: pass CPU tensors to the interpreter")
        if var.size != 8:
            raise PtxError(f"argument {i} of {kname} is a {var.size}-byte parameter but a tensor was given")
        space.add(Region.of_tensor(arg, f"argument {i}"))
        return struct.pack("<Q", arg.data_ptr())
    if isinstance(arg, (bytes, bytearray)):
        if len(arg) != var.size:
            raise PtxError(f"argument {i} of {kname} needs {var.size} bytes, got {len(arg)}")
        return bytes(arg)
    if isinstance(arg, (bool, int, float, np.number)):
        c = carrier(var.type) if var.size == carrier(var.type).itemsize else None
        if c is None:
            raise PtxError(f"argument {i} of {kname} is a {var.size}-byte struct: pass bytes")
        if c.kind == "f":
            return np.array(arg, dtype=c).tobytes()
        if isinstance(arg, float):
            raise PtxError(f"argument {i} of {kname} is an integer parameter, got float {arg}")
        return np.array(int(arg) & ((1 << (8 * c.itemsize)) - 1), dtype=f"u{c.itemsize}").tobytes()
    raise PtxError(f"argument {i} of {kname}: unsupported type {type(arg).__name__} "
                   "(pass CPU tensors, Python numbers or bytes)")


def compile_cuda(source: str, name: str = "kernel.cu", flags=()) -> Module:
    """Compile CUDA C++ with nvcc (cached) and return a Module whose kernels run on the CPU."""
    return Module(compile_to_ptx(source, name, tuple(flags)), name)


def load_ptx(ptx: str, name: str = "kernel.cu") -> Module:
    """A Module from PTX text (its `.loc` lines name `name` as the source file)."""
    return Module(ptx, name)
