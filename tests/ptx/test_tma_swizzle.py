"""The TMA shared-memory swizzle and box addressing (pkbsim/ptx/tma.py) as pure functions."""
import numpy as np
import pytest

from pkbsim.ptx import tma

SPAN = {1: 32, 2: 64, 3: 128}


def reference(addr: int, mode: int) -> int:
    """The PTX ISA's description: within each span-wide group of 16-byte chunks, the chunk index is XORed
    with the index of the 128-byte line modulo span/16 (128B: row of 128 bytes mod 8, repeating every
    1024 bytes; 64B: every 512; 32B: every 256)."""
    if mode == 0:
        return addr
    chunks = SPAN[mode] // 16
    chunk = (addr // 16) % chunks
    line = (addr // 128) % chunks
    return addr - chunk * 16 + (chunk ^ line) * 16


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_swizzle_matches_the_chunk_xor_line_definition(mode):
    addrs = np.arange(0, 8192, 2, dtype=np.uint64)
    want = np.array([reference(int(a), mode) for a in addrs], np.uint64)
    assert np.array_equal(tma.swizzle(addrs, mode), want)
    assert all(tma.swizzle(int(a), mode) == int(w) for a, w in zip(addrs[::97], want[::97]))


def test_swizzle_known_values():
    assert tma.swizzle(128, 3) == 144                   # line 1, chunk 0 -> chunk 1
    assert tma.swizzle(1024 + 7 * 128 + 2 * 16 + 6, 3) == 1024 + 7 * 128 + 5 * 16 + 6   # chunk 2 ^ 7
    assert tma.swizzle(1024, 3) == 1024                 # the pattern repeats every 1024 bytes
    assert tma.swizzle(64, 2) == 64 and tma.swizzle(192, 2) == 208 and tma.swizzle(512 + 128, 2) == 512 + 144
    assert tma.swizzle(32, 1) == 32 and tma.swizzle(160, 1) == 176 and tma.swizzle(256, 1) == 256


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_swizzle_is_a_16_byte_granular_involution_within_each_repeat(mode):
    repeat = SPAN[mode] * 8
    a = np.arange(4 * repeat, dtype=np.uint64)
    s = tma.swizzle(a, mode)
    assert np.array_equal(tma.swizzle(s, mode), a)
    assert np.array_equal(s % np.uint64(16), a % np.uint64(16))
    assert np.array_equal(s // np.uint64(repeat), a // np.uint64(repeat))
    assert len(np.unique(s)) == len(a)


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_swizzle_agrees_with_the_address_formula_tiles_index_with(mode):
    span = SPAN[mode]
    a = np.arange(0, 16384, 4, dtype=np.uint64)
    other = a ^ (((a % np.uint64(span * 8)) >> np.uint64(7)) << np.uint64(4))
    assert np.array_equal(tma.swizzle(a, mode), other)


def _map(**kw):
    args = dict(dtype=7, rank=3, address=0x10000, dims=[10, 6, 4], strides=[48, 512], box=[8, 4, 2],
                estrides=[1, 1, 1])
    args.update(kw)
    return tma.decode(tma.encode(**args))


def test_encode_decode_round_trip():
    m = _map(swizzle=2, oob_fill=1, l2_promotion=2)
    assert (m.dtype, m.rank, m.esize, m.address, m.swizzle, m.oob_fill, m.l2_promotion) == (7, 3, 4, 0x10000, 2, 1, 2)
    assert m.dims == (10, 6, 4) and m.strides == (4, 48, 512) and m.box == (8, 4, 2) and m.estrides == (1, 1, 1)
    assert m.box_bytes == 8 * 4 * 2 * 4 and tma.fill_value(m) == 0x7FFFFFFF
    with pytest.raises(tma.NotATensorMap):
        tma.decode(bytes(128))


def test_box_layout_addresses_bounds_and_shared_order():
    m = _map()
    addrs, inside, offs = tma.box_layout(m, [6, 4, -1])
    assert len(addrs) == 8 * 4 * 2 and np.array_equal(offs, np.arange(64, dtype=np.uint64) * 4)
    idx = np.arange(64)
    x, y, z = 6 + idx % 8, 4 + (idx // 8) % 4, -1 + idx // 32
    want_in = (x < 10) & (y < 6) & (z >= 0)
    assert np.array_equal(inside, want_in)
    want = 0x10000 + x * 4 + y * 48 + z * 512
    assert np.array_equal(addrs[inside], want[want_in].astype(np.uint64))
    assert not addrs[~inside].any()


def test_element_strides_skip_elements_except_along_dimension_0():
    m = _map(box=[8, 4, 2], estrides=[2, 2, 1])   # dimension 0's stride is ignored (no interleave)
    assert m.counts == (8, 2, 2)
    addrs, inside, _ = tma.box_layout(m, [0, 0, 0])
    assert inside.all()
    assert np.array_equal(addrs[:10], (0x10000 + np.r_[np.arange(8) * 4, 2 * 48, 2 * 48 + 4]).astype(np.uint64))


def test_unsupported_maps_are_named():
    assert "interleaved" in _map(interleave=1).unsupported()
    assert "128B_ATOM_32B" in _map(swizzle=4).unsupported()
    assert _map().unsupported() is None
