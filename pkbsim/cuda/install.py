"""Route `torch.utils.cpp_extension.load_inline`/`load` to pkb's build while a program runs on the
simulated world (`pkb check`), so unmodified torchrun scripts that build an inline-CUDA extension run
their kernels on the interpreter. `pkb screen` installs its own stand-in first (which compile-checks
and then uses the same build); that one is left in place. Without nvcc the calls fail with one line
saying inline CUDA cannot be simulated here.
"""
from __future__ import annotations

from pkbsim.ptx.compile import find_nvcc

NO_NVCC = ("inline CUDA needs nvcc to be simulated (device code is compiled to PTX): install the CUDA "
           "toolkit or set CUDA_HOME")


class NvccMissing(RuntimeError):
    pass


def install_cuda_extensions(patches) -> None:
    import torch.utils.cpp_extension as cpp

    if getattr(cpp.load_inline, "pkb_stand_in", False):
        return
    if find_nvcc() is None:
        def unavailable(*args, **kwargs):
            raise NvccMissing(NO_NVCC)
        patches.set(cpp, "load_inline", unavailable)
        patches.set(cpp, "load", unavailable)
        return
    from pkbsim.cuda import extension

    patches.set(cpp, "load_inline", extension.load_inline)
    patches.set(cpp, "load", extension.load)
