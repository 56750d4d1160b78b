#pragma once
// bf16 conversions for the training path on the OpenMP pool, and the
// element access the kernels on f32 or bf16 storage share (train_kernels.hpp
// operand_types). Same rounding as polyhal::f32_to_bf16_bits (round to
// nearest even).
#include <bit>
#include <cstdint>
#include <memory>

#include "polyhal/dtype.hpp"
#include "polyhal/kernel.hpp"

namespace polyhal::cpu {

/// Element i of f32 or bf16 (bits) storage, as f32.
inline float load_f32(const float* p, std::int64_t i) {
  return p[i];
}
inline float load_f32(const std::uint16_t* p, std::int64_t i) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(p[i]) << 16);
}
/// Stores v at element i of f32 or bf16 (rounded to nearest even) storage.
inline void store_f32(float* p, std::int64_t i, float v) {
  p[i] = v;
}
inline void store_f32(std::uint16_t* p, std::int64_t i, float v) {
  p[i] = detail::bf16_bits_inline(v);
}

/// train_kernels.hpp "cast": f32 -> bf16 (or a copy for round_to f32).
std::unique_ptr<Kernel> make_omp_cast(const KernelDesc& desc);

/// dst[i] = bf16 bits of src[i].
void to_bf16(const float* src, std::uint16_t* dst, std::int64_t count);
/// v[i] = v[i] rounded to bf16 (kept as f32).
void round_to_bf16(float* values, std::int64_t count);

}  // namespace polyhal::cpu
