#pragma once
// bf16 conversions on the OpenMP pool for the training path, whose tensors
// are f32 with values held at bf16 (train_kernels.hpp "round_to"): operands
// are narrowed into bf16 scratch before a GEMM and results rounded after.
// Same rounding as polyhal::f32_to_bf16_bits (round to nearest even).
#include <cstdint>

namespace polyhal::cpu {

/// dst[i] = bf16 bits of src[i].
void to_bf16(const float* src, std::uint16_t* dst, std::int64_t count);
/// v[i] = v[i] rounded to bf16 (kept as f32).
void round_to_bf16(float* values, std::int64_t count);

}  // namespace polyhal::cpu
