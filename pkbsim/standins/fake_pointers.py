"""Addresses for fake tensors in a shape run.

A shape run (FakeTensorMode) has no memory behind its tensors: torch reports every fake storage at address 0,
so two different inputs look like one buffer. A program that keys a cache on `data_ptr()` then finds its
cache hit at full size when it missed at screen size, and the cost stage predicts a speed-up for work it
never timed. For the length of a shape run each fake (meta) storage gets an address of its own, as a real
allocator would give it: distinct from every other live storage, the same for as long as the storage lives,
aligned as the CUDA caching allocator aligns (512 bytes), and far above any address a real process maps
(2**60 and up), so it can never be mistaken for host memory. A view's `data_ptr()` is its storage's address
plus its offset. Only Python callers see these addresses; torch's kernels never read them (there is no data).
"""
from __future__ import annotations

import threading

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.multiprocessing.reductions import StorageWeakRef as _weak_ref   # public, in torch 2.11 and 2.13

BASE = 1 << 60
ALIGN = 512


class FakeAddresses:
    """storage -> address, for the storages a shape run asks about."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_storage: dict[int, tuple[object, int]] = {}  # StorageImpl id -> (weak ref, address)
        self._next = BASE
        self._prune_at = 1024

    def of(self, storage) -> int:
        if not storage.nbytes():
            return 0            # as a real allocator: an empty allocation has no address
        ref = _weak_ref(storage)   # holds the StorageImpl's memory: its id is not reused while we hold it
        with self._lock:
            known = self._by_storage.get(ref.cdata)
            if known is not None and not known[0].expired():
                return known[1]
            address = self._next
            self._next += -(-max(int(storage.nbytes()), 1) // ALIGN) * ALIGN
            self._by_storage[ref.cdata] = (ref, address)
            if len(self._by_storage) >= self._prune_at:   # forget storages that died (their ids may come back)
                self._by_storage = {k: v for k, v in self._by_storage.items() if not v[0].expired()}
                self._prune_at = max(1024, 2 * len(self._by_storage))
            return address


def install_fake_pointers(patches) -> FakeAddresses:
    """For the length of the run: FakeTensor.data_ptr and a meta storage's data_ptr give FakeAddresses'."""
    addresses = FakeAddresses()
    storage_data_ptr = torch.UntypedStorage.data_ptr

    def fake_data_ptr(self) -> int:
        return addresses.of(self.untyped_storage()) + self.storage_offset() * self.element_size()

    def data_ptr(self) -> int:
        if self.device.type == "meta":
            return addresses.of(self)
        return storage_data_ptr(self)

    patches.set_own(FakeTensor, "data_ptr", fake_data_ptr)
    patches.set_own(torch.UntypedStorage, "data_ptr", data_ptr)
    return addresses
