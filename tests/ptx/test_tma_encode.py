"""pkb's cuTensorMapEncodeTiled (pkbsim/cuda/runtime/driver/tensor_map.cpp), called through ctypes: it
validates its parameters as the driver documents, returns CUDA_ERROR_INVALID_VALUE (1) for a violation,
and writes the same 128 bytes the interpreter decodes (pkbsim.ptx.tma)."""
import ctypes
import shutil

import numpy as np
import pytest

from pkbsim.ptx import find_nvcc, tma

INVALID = 1


@pytest.fixture(scope="module")
def lib():
    if find_nvcc() is None or shutil.which("g++") is None:
        pytest.skip("needs the CUDA toolkit's cuda.h and g++")
    from pkbsim.cuda import driver
    so = ctypes.CDLL(driver.library_path())
    so.cuTensorMapEncodeTiled.restype = ctypes.c_int
    so.cuTensorMapEncodeTiled.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                                          ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                          ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    so.cuTensorMapReplaceAddress.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return so


def encode(lib, dtype=9, rank=2, address=0x7F0000001000, dims=(100, 70), strides=(208,), box=(64, 32),
           estrides=(1, 1), interleave=0, swizzle=3, l2=0, oob=0, map_offset=0):
    buf = np.full(256, 0xAB, np.uint8)
    base = (-buf.ctypes.data) % 64 + map_offset
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    rc = lib.cuTensorMapEncodeTiled(
        buf.ctypes.data + base, dtype, rank, address, (u64 * 5)(*dims), (u64 * 4)(*strides), (u32 * 5)(*box),
        (u32 * 5)(*estrides), interleave, swizzle, l2, oob)
    return rc, buf[base:base + 128].tobytes()


def test_a_valid_map_encodes_what_the_interpreter_decodes(lib):
    rc, raw = encode(lib)
    assert rc == 0
    assert raw == tma.encode(9, 2, 0x7F0000001000, [100, 70], [208], [64, 32], [1, 1], swizzle=3)
    m = tma.decode(raw)
    assert (m.esize, m.dims, m.strides, m.box, m.swizzle) == (2, (100, 70), (2, 208), (64, 32), 3)
    rc, raw = encode(lib, dtype=7, rank=5, dims=(16, 8, 4, 3, 2), strides=(64, 512, 2048, 6144),
                     box=(16, 8, 2, 1, 1), estrides=(1, 1, 2, 1, 1), swizzle=2, l2=2, oob=1)
    assert rc == 0 and tma.decode(raw).strides == (4, 64, 512, 2048, 6144)


@pytest.mark.parametrize("change", [
    dict(address=0x7F0000001008),              # global address not 16-byte aligned
    dict(strides=(200,)),                      # stride not a multiple of 16
    dict(strides=(1 << 40,)),                  # stride beyond 2^40
    dict(box=(64, 257)),                       # box dimension above 256
    dict(box=(0, 32)),
    dict(box=(12, 32), swizzle=0),             # inner box of 24 bytes: not a multiple of 16
    dict(box=(128, 32)),                       # 256-byte inner box under the 128B swizzle
    dict(box=(64, 32), swizzle=2),             # 128-byte inner box under the 64B swizzle
    dict(rank=0), dict(rank=6),
    dict(dims=(0, 70)), dict(dims=((1 << 32) + 1, 70)),
    dict(estrides=(1, 9)), dict(estrides=(1, 0)),
    dict(dtype=3, oob=1, box=(32, 32)),        # NaN fill for an integer type
    dict(dtype=16), dict(swizzle=7), dict(interleave=3), dict(l2=4), dict(oob=2),
    dict(interleave=1),                        # interleave needs rank >= 3
    dict(map_offset=8),                        # the map itself must be 64-byte aligned
])
def test_invalid_parameters_are_refused_as_the_driver_does(lib, change):
    rc, raw = encode(lib, **change)
    assert rc == INVALID
    assert raw == bytes([0xAB]) * 128            # the map is left untouched


def test_replace_address_keeps_the_rest(lib):
    buf = np.zeros(192, np.uint8)
    base = (-buf.ctypes.data) % 64
    raw = tma.encode(9, 2, 0x1000, [100, 70], [208], [64, 32], [1, 1], swizzle=3)
    buf[base:base + 128] = np.frombuffer(raw, np.uint8)
    assert lib.cuTensorMapReplaceAddress(buf.ctypes.data + base, 0x2000) == 0
    assert tma.decode(buf[base:base + 128].tobytes()).address == 0x2000
    assert lib.cuTensorMapReplaceAddress(buf.ctypes.data + base, 0x2008) == INVALID
