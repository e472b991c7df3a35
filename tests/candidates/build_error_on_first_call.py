"""Broken: its extension's C++ does not compile, and it is built on the first call, not at import.
Must be "compile_error" (it was "error": only import-time builds were recognised)."""
from torch.utils.cpp_extension import load_inline


def solution(x):
    load_inline("pkb_lazy_broken_build", cpp_sources="int broken( { return 0; }", functions=["broken"])
    return x
