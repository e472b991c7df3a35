import os

import pytest

from pkbsim.ptx import compile_cuda, find_nvcc

KERNELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ptx_kernels")


def corpus_module(name: str):
    if find_nvcc() is None:
        pytest.skip("nvcc not found (install the CUDA toolkit to run the PTX corpus)")
    with open(os.path.join(KERNELS, name)) as fh:
        return compile_cuda(fh.read(), name)


@pytest.fixture(scope="session")
def elementwise():
    return corpus_module("elementwise.cu")


@pytest.fixture(scope="session")
def cooperative():
    return corpus_module("cooperative.cu")
