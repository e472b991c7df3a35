"""TMA tensor maps and the copy engine's tile addressing, as pure functions.

A CUtensorMap here holds pkb's own encoding of cuTensorMapEncodeTiled's parameters (written by the driver
stand-in, pkbsim/cuda/runtime/driver/tensor_map.cpp; the layout is in that file's header). `decode` reads
it back; `box_layout` gives, for a box at given coordinates, every element's global byte address, whether
it lies inside the tensor, and its byte offset in shared memory; `swizzle` is the shared-memory swizzle.

Shared-memory layout of a box (interleave NONE): the elements traversed are
`ceil(boxDim[i] / elementStrides[i])` along dimension i (dimension 0 always steps by 1: the driver ignores
elementStrides[0] without interleave), packed densely with dimension 0 fastest, then swizzled.

Swizzle (CU_TENSOR_MAP_SWIZZLE_32B/64B/128B): within each 16-byte-granular shared address, the 16-byte
chunk index (address bits 4..) is XORed with the address bits from bit 7 up: 128B: bits [4,7) ^= bits
[7,10) (chunk of a 128-byte row XOR row index mod 8, pattern repeating every 1024 bytes); 64B: bits [4,6)
^= bits [7,9) (repeat 512 bytes); 32B: bit 4 ^= bit 7 (repeat 256 bytes). It is a function of the shared
memory address itself, as the hardware applies it (CUTLASS's Swizzle<3,4,3>, <2,4,3>, <1,4,3> on byte
addresses; ThunderKittens' st tiles index with the same formula), so a box must start at a shared address
aligned to the pattern's repeat for the pattern to line up with its rows.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = 0x4D544B50                      # "PKTM"
SIZE = 128
SWIZZLE_BITS = {0: 0, 1: 1, 2: 2, 3: 3}  # CU_TENSOR_MAP_SWIZZLE_NONE/32B/64B/128B
SWIZZLE_NAMES = {0: "none", 1: "32B", 2: "64B", 3: "128B", 4: "128B_ATOM_32B", 5: "128B_ATOM_32B_FLIP_8B",
                 6: "128B_ATOM_64B"}
FLOAT_TYPES = {6, 7, 8, 9, 10, 11, 12}   # f16, f32, f64, bf16, f32_ftz, tf32, tf32_ftz
_NAN = {2: 0x7FFF, 4: 0x7FFFFFFF, 8: 0x7FFFFFFFFFFFFFFF}


class NotATensorMap(ValueError):
    """The 128 bytes are no tensor map pkb's cuTensorMapEncodeTiled wrote."""


@dataclass(frozen=True)
class TensorMap:
    dtype: int
    rank: int
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int
    esize: int                  # bytes per element (0: a packed 4/6-bit type)
    address: int
    dims: tuple[int, ...]       # elements per dimension
    strides: tuple[int, ...]    # bytes per step of each dimension (dimension 0: the element size)
    box: tuple[int, ...]
    estrides: tuple[int, ...]

    @property
    def counts(self) -> tuple[int, ...]:
        """Elements the box holds along each dimension."""
        return tuple(self.box[0] if i == 0 and self.interleave == 0 else -(-self.box[i] // self.estrides[i])
                     for i in range(self.rank))

    @property
    def box_bytes(self) -> int:
        return int(np.prod(self.counts)) * self.esize

    def unsupported(self) -> str | None:
        """Why pkb's copy engine cannot run this map (None: it can)."""
        if self.esize == 0:
            return "a packed 4/6-bit tensor-map data type"
        if self.interleave != 0:
            return "an interleaved tensor map (CU_TENSOR_MAP_INTERLEAVE_16B/32B)"
        if self.swizzle not in SWIZZLE_BITS:
            return f"tensor-map swizzle mode {SWIZZLE_NAMES.get(self.swizzle, self.swizzle)}"
        return None


def decode(raw: bytes) -> TensorMap:
    raw = bytes(raw)
    if len(raw) < SIZE or struct.unpack_from("<I", raw, 0)[0] != MAGIC or raw[4] != 1:
        raise NotATensorMap("not a tensor map made by cuTensorMapEncodeTiled")
    dtype, rank, interleave, swizzle, l2, oob, esize = raw[5:12]
    if not 1 <= rank <= 5:
        raise NotATensorMap(f"tensor map of rank {rank}")
    address = struct.unpack_from("<Q", raw, 16)[0]
    dims = struct.unpack_from("<5Q", raw, 24)[:rank]
    strides = (esize,) + struct.unpack_from("<4Q", raw, 64)[:rank - 1]
    box = struct.unpack_from("<5H", raw, 96)[:rank]
    estrides = tuple(raw[106:106 + rank])
    return TensorMap(dtype, rank, interleave, swizzle, l2, oob, esize, address, tuple(dims), tuple(strides),
                     tuple(box), estrides)


def encode(dtype: int, rank: int, address: int, dims, strides, box, estrides, interleave: int = 0,
           swizzle: int = 0, l2_promotion: int = 0, oob_fill: int = 0, esize: int | None = None) -> bytes:
    """The same 128 bytes the driver stand-in writes (no validation: for tests and PTX-level use)."""
    sizes = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
    out = bytearray(SIZE)
    struct.pack_into("<IBBBBBBBB", out, 0, MAGIC, 1, dtype, rank, interleave, swizzle, l2_promotion, oob_fill,
                     sizes.get(dtype, 0) if esize is None else esize)
    struct.pack_into("<Q", out, 16, address)
    for i in range(rank):
        struct.pack_into("<Q", out, 24 + 8 * i, dims[i])
        struct.pack_into("<H", out, 96 + 2 * i, box[i])
        out[106 + i] = estrides[i]
        if i:
            struct.pack_into("<Q", out, 64 + 8 * (i - 1), strides[i - 1])
    return bytes(out)


def swizzle(addr, mode: int):
    """The shared address where the byte meant for `addr` lands under swizzle `mode` (0..3: none, 32B, 64B,
    128B); an involution, so it also maps a swizzled address back. Works on ints and uint64 arrays."""
    bits = SWIZZLE_BITS[mode]
    if not bits:
        return addr
    if isinstance(addr, np.ndarray):
        a = addr.astype(np.uint64, copy=False)
        return a ^ (((a >> np.uint64(7)) & np.uint64((1 << bits) - 1)) << np.uint64(4))
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


def box_layout(tm: TensorMap, coords) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(global byte address, inside-the-tensor flag, shared byte offset before swizzling) of every element
    of the box whose first element is at `coords` (signed element coordinates, dimension 0 first), in
    shared-memory order. Addresses of elements outside the tensor are 0."""
    counts = tm.counts
    steps = [1 if i == 0 and tm.interleave == 0 else tm.estrides[i] for i in range(tm.rank)]
    n = int(np.prod(counts))
    flat = np.arange(n, dtype=np.int64)
    inside = np.ones(n, bool)
    offset = np.zeros(n, np.int64)
    rest = flat
    for i in range(tm.rank):
        k = rest % counts[i]
        rest = rest // counts[i]
        c = np.int64(int(coords[i])) + k * steps[i]
        inside &= (c >= 0) & (c < tm.dims[i])
        offset += np.where(inside, c, 0) * np.int64(tm.strides[i])
    addr = np.where(inside, np.uint64(tm.address) + offset.astype(np.uint64), np.uint64(0))
    return addr, inside, (flat * tm.esize).astype(np.uint64)


def fill_value(tm: TensorMap) -> int:
    """What an element outside the tensor reads as: zero, or a NaN with CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA."""
    return _NAN.get(tm.esize, 0) if tm.oob_fill == 1 and tm.dtype in FLOAT_TYPES else 0


def carrier(tm: TensorMap):
    return np.dtype(f"<u{tm.esize}")
