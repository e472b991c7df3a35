"""The PTX of a registered module, read from the fatbin nvcc embedded in the extension.

nvcc's static constructor hands `&__fatDeviceText` to __cudaRegisterFatBinary: a wrapper
{magic 0x466243B1, version, data pointer, ...}; at `data` a fatbin header {0xBA55ED50, version,
header size, payload size} and then entries {kind (1 = PTX), _, header size, payload size, ...}.
The build passes --compress-mode=none, so a PTX entry is plain text.
"""
from __future__ import annotations

import ctypes
import struct

WRAPPER_MAGIC, FATBIN_MAGIC, KIND_PTX = 0x466243B1, 0xBA55ED50, 1


def module_ptx(wrapper_addr: int) -> str:
    magic, _version, data = struct.unpack("<iiQ", ctypes.string_at(wrapper_addr, 16))
    if magic & 0xFFFFFFFF != WRAPPER_MAGIC:
        raise ValueError(f"not a fatbin wrapper at 0x{wrapper_addr:x}")
    fmagic, _fver, hsize, payload = struct.unpack("<IHHQ", ctypes.string_at(data, 16))
    if fmagic != FATBIN_MAGIC:
        raise ValueError("fatbin header not found (was the extension built by pkb?)")
    pos, end, texts = data + hsize, data + hsize + payload, []
    while pos < end:
        kind, _, ehsize, size = struct.unpack("<HHIQ", ctypes.string_at(pos, 16))
        body = ctypes.string_at(pos + ehsize, size)
        if kind == KIND_PTX:
            if body[:4] == b"\x28\xb5\x2f\xfd":
                raise ValueError("the fatbin's PTX is compressed: build with --compress-mode=none")
            texts.append(body.rstrip(b"\0").decode())
        pos += ehsize + size
    if not texts:
        raise ValueError("the fatbin holds no PTX: build with code=compute_90a")
    return texts[-1]
