#pragma once
/// @file dtype.hpp
/// Element types and exact conversions between them.
///
/// f16 is IEEE 754 binary16, bf16 the upper half of binary32. Narrowing
/// conversions round to nearest, ties to even; they keep the sign of zero,
/// produce subnormals where the format has them, overflow to infinity, keep
/// infinities, and turn NaN into a quiet NaN of the same sign (never into
/// infinity). These rules are tested exhaustively (tests/dtype_test.cpp).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace polyhal {

enum class DType : std::uint8_t { f32, f16, bf16, i32, i64 };

/// Size of one element in bytes.
std::size_t dtype_size(DType type) noexcept;
/// Canonical lower-case name: "f32", "f16", "bf16", "i32", "i64".
std::string_view dtype_name(DType type) noexcept;
/// Parses a canonical name (also "float32", "float16", "bfloat16", "fp16", "fp32").
std::optional<DType> parse_dtype(std::string_view name) noexcept;
/// True for f32, f16 and bf16.
bool is_floating(DType type) noexcept;

/// f32 -> binary16 bits, round to nearest even.
std::uint16_t f32_to_f16_bits(float value) noexcept;
/// binary16 bits -> f32 (exact).
float f16_bits_to_f32(std::uint16_t bits) noexcept;
/// f32 -> bfloat16 bits, round to nearest even.
std::uint16_t f32_to_bf16_bits(float value) noexcept;

namespace detail {
/// f32_to_bf16_bits, inline so that conversion loops in kernels vectorise:
/// NaN stays a (quiet) NaN; otherwise round to nearest even, where a carry
/// into the exponent is correct rounding and past the largest finite value
/// yields infinity.
inline std::uint16_t bf16_bits_inline(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
/// round_through(DType::bf16, value), inline.
inline float round_bf16_inline(float value) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bf16_bits_inline(value)) << 16);
}
}  // namespace detail
/// bfloat16 bits -> f32 (exact).
float bf16_bits_to_f32(std::uint16_t bits) noexcept;

/// f32 -> binary16 with stochastic rounding: rounds up with probability equal
/// to the discarded fraction, using `random` (uniform 32-bit) as the coin.
/// Used by the IPU device model, whose hardware offers stochastic rounding.
std::uint16_t f32_to_f16_bits_stochastic(float value, std::uint32_t random) noexcept;

/// Rounds an f32 value through `type` and back (identity for f32).
float round_through(DType type, float value) noexcept;

/// Converts `count` elements from `src` (of `from`) to `dst` (of `to`).
/// Float to integer truncates toward zero and saturates; NaN becomes 0.
void convert(const void* src, DType from, void* dst, DType to, std::size_t count);

}  // namespace polyhal
