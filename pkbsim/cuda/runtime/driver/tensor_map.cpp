// pkb's stand-in for the driver calls that build TMA tensor maps (cuTensorMapEncodeTiled,
// cuTensorMapReplaceAddress) and name driver errors (cuGetErrorString, cuGetErrorName). Linked into an
// extension that calls them (pkbsim/cuda/driver.py); the PTX interpreter reads the map back
// (pkbsim/ptx/tma.py).
//
// The 128-byte CUtensorMap is opaque on a GPU; here it holds pkb's own encoding of every parameter:
//   0: u32 magic 'PKTM'   4: u8 version (1)   5: u8 data type   6: u8 rank   7: u8 interleave
//   8: u8 swizzle   9: u8 L2 promotion   10: u8 OOB fill   11: u8 element size in bytes (0: packed type)
//  16: u64 global address   24: u64 global dims[5]   64: u64 global strides of dims 1..4 (bytes)
//  96: u16 box dims[5]   106: u8 element strides[5]
// Parameters are validated as the driver documents them (cuda.h, cuTensorMapEncodeTiled); a violation
// returns CUDA_ERROR_INVALID_VALUE and leaves the map untouched.
#include <cuda.h>

#include <cstdint>
#include <cstring>

namespace {
constexpr uint32_t kMagic = 0x4d544b50u;  // "PKTM" little-endian
constexpr int kOffAddr = 16, kOffDims = 24, kOffStrides = 64, kOffBox = 96, kOffEstride = 106;

int element_size(int dtype) {
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16: case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: case CU_TENSOR_MAP_DATA_TYPE_INT32: case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ: case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64: case CU_TENSOR_MAP_DATA_TYPE_INT64: case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;  // the packed 4- and 6-bit types
  }
}

bool is_float(int dtype) {
  return dtype >= CU_TENSOR_MAP_DATA_TYPE_FLOAT16 && dtype <= CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
}

bool packed16(int dtype) {
  return dtype == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B || dtype == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

int swizzle_span(int swizzle) {
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_NONE: return 0;
    default: return 128;
  }
}

bool valid_address(uint64_t a, int dtype, int interleave) {
  unsigned align = (interleave == CU_TENSOR_MAP_INTERLEAVE_32B || packed16(dtype)) ? 32 : 16;
  return a % align == 0;
}
}  // namespace

extern "C" {
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank, void* global,
                                        const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                        const cuuint32_t* estrides, CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                        CUtensorMapFloatOOBfill oob) {
  const int dt = static_cast<int>(dtype), il = static_cast<int>(interleave), sw = static_cast<int>(swizzle);
  if (!map || reinterpret_cast<uintptr_t>(map) % 64) return CUDA_ERROR_INVALID_VALUE;
  if (dt < 0 || dt > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B) return CUDA_ERROR_INVALID_VALUE;
  if (rank < 1 || rank > 5 || (il != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3)) return CUDA_ERROR_INVALID_VALUE;
  if (il < 0 || il > CU_TENSOR_MAP_INTERLEAVE_32B) return CUDA_ERROR_INVALID_VALUE;
  if (sw < 0 || sw > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B) return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<int>(l2) < 0 || static_cast<int>(l2) > CU_TENSOR_MAP_L2_PROMOTION_L2_256B) return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<int>(oob) < 0 || static_cast<int>(oob) > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
    return CUDA_ERROR_INVALID_VALUE;
  if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float(dt)) return CUDA_ERROR_INVALID_VALUE;
  if (!dims || !box || !estrides || (rank > 1 && !strides)) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t addr = reinterpret_cast<uintptr_t>(global);
  if (!valid_address(addr, dt, il)) return CUDA_ERROR_INVALID_VALUE;
  const int esize = element_size(dt);
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (1ull << 32)) return CUDA_ERROR_INVALID_VALUE;
    if (box[i] == 0 || box[i] > 256) return CUDA_ERROR_INVALID_VALUE;
    if (estrides[i] == 0 || estrides[i] > 8) return CUDA_ERROR_INVALID_VALUE;
  }
  if (packed16(dt) && dims[0] % 128) return CUDA_ERROR_INVALID_VALUE;
  if (dt == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && dims[0] % 2) return CUDA_ERROR_INVALID_VALUE;
  for (cuuint32_t i = 0; i + 1 < rank; ++i) {
    const unsigned mult = (il == CU_TENSOR_MAP_INTERLEAVE_32B || packed16(dt)) ? 32 : 16;
    if (strides[i] % mult || strides[i] >= (1ull << 40)) return CUDA_ERROR_INVALID_VALUE;
  }
  if (il == CU_TENSOR_MAP_INTERLEAVE_NONE && esize && (box[0] * esize) % 16) return CUDA_ERROR_INVALID_VALUE;
  if (packed16(dt) && box[0] != 128) return CUDA_ERROR_INVALID_VALUE;
  if (il == CU_TENSOR_MAP_INTERLEAVE_NONE && sw != CU_TENSOR_MAP_SWIZZLE_NONE && esize &&
      box[0] * static_cast<unsigned>(esize) > static_cast<unsigned>(swizzle_span(sw)))
    return CUDA_ERROR_INVALID_VALUE;
  if (il == CU_TENSOR_MAP_INTERLEAVE_32B && sw != CU_TENSOR_MAP_SWIZZLE_32B) return CUDA_ERROR_INVALID_VALUE;
  if (dt == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && il != CU_TENSOR_MAP_INTERLEAVE_NONE) return CUDA_ERROR_INVALID_VALUE;

  unsigned char out[128] = {};
  std::memcpy(out, &kMagic, 4);
  out[4] = 1;
  out[5] = static_cast<unsigned char>(dt);
  out[6] = static_cast<unsigned char>(rank);
  out[7] = static_cast<unsigned char>(il);
  out[8] = static_cast<unsigned char>(sw);
  out[9] = static_cast<unsigned char>(l2);
  out[10] = static_cast<unsigned char>(oob);
  out[11] = static_cast<unsigned char>(esize);
  std::memcpy(out + kOffAddr, &addr, 8);
  for (cuuint32_t i = 0; i < rank; ++i) {
    uint64_t d = dims[i];
    uint16_t b = static_cast<uint16_t>(box[i]);
    std::memcpy(out + kOffDims + 8 * i, &d, 8);
    std::memcpy(out + kOffBox + 2 * i, &b, 2);
    out[kOffEstride + i] = static_cast<unsigned char>(estrides[i]);
    if (i > 0) {
      uint64_t s = strides[i - 1];
      std::memcpy(out + kOffStrides + 8 * (i - 1), &s, 8);
    }
  }
  std::memcpy(map, out, sizeof(out));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap* map, void* global) {
  if (!map || reinterpret_cast<uintptr_t>(map) % 64) return CUDA_ERROR_INVALID_VALUE;
  unsigned char* raw = reinterpret_cast<unsigned char*>(map);
  uint32_t magic;
  std::memcpy(&magic, raw, 4);
  if (magic != kMagic) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t addr = reinterpret_cast<uintptr_t>(global);
  if (!valid_address(addr, raw[5], raw[7])) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(raw + kOffAddr, &addr, 8);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *out = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *out = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *out = "CUDA_ERROR_NOT_SUPPORTED"; break;
    default: *out = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *out = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *out = "invalid argument"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *out = "operation not supported"; break;
    default: *out = "unknown error"; break;
  }
  return CUDA_SUCCESS;
}
}
