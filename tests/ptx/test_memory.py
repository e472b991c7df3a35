"""The address-space interface the multi-rank world builds on."""
import numpy as np
import pytest
import torch

from pkbsim.ptx import AddressSpace, MemoryFault, Region
from pkbsim.ptx.memory import gather, scatter


def test_tensor_regions_resolve_real_pointers():
    a, b = torch.arange(16, dtype=torch.int32), torch.arange(100, 108, dtype=torch.int32)
    space = AddressSpace()
    space.add(Region.of_tensor(a, "a"))
    space.add(Region.of_tensor(b, "b"))
    for t in (a, b):
        addrs = np.uint64(t.data_ptr()) + np.arange(0, 4 * len(t), 4, dtype=np.uint64)
        region, off = space.resolve(addrs, 4)
        assert np.array_equal(gather(region, off, np.int32), t.numpy())
        scatter(region, off[:1], np.int32, np.array([-7], np.int32))
        assert t[0].item() == -7


def test_views_share_their_storage_region():
    base = torch.zeros(64)
    space = AddressSpace()
    space.add(Region.of_tensor(base[8:], "view"))
    space.add(Region.of_tensor(base, "whole"))
    assert space.find(base.data_ptr() + 4).name == "view"


def test_faults_name_the_problem():
    t = torch.zeros(4)
    space = AddressSpace()
    space.add(Region.of_tensor(t, "t"))
    with pytest.raises(MemoryFault, match="outside every mapped buffer"):
        space.resolve(np.array([t.data_ptr() + 16], np.uint64), 4)
    region, off = space.resolve(np.array([t.data_ptr() + 2], np.uint64), 1)
    with pytest.raises(MemoryFault, match="misaligned 4-byte access"):
        gather(region, off, np.float32)


def test_overlapping_regions_are_rejected():
    buf = np.zeros(64, np.uint8)
    space = AddressSpace()
    space.add(Region(buf.ctypes.data + 16, buf[16:48], "middle"))
    with pytest.raises(MemoryFault, match="overlaps"):
        space.add(Region(buf.ctypes.data, buf[:32], "front"))
