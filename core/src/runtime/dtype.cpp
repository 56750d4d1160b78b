#include "polyhal/dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace polyhal {
namespace {

constexpr std::uint32_t kF32AbsMask = 0x7fffffffu;
constexpr std::uint32_t kF32Inf = 0x7f800000u;
// (127 - 15) << 23: moves an f32 exponent to f16 bias.
constexpr std::uint32_t kF16Rebias = 0x38000000u;
// Smallest f32 (as bits) that rounds to f16 infinity: 65520 = 65504 + half an ulp.
constexpr std::uint32_t kF16OverflowThreshold = 0x477ff000u;
// 2^-14, the smallest normal f16.
constexpr std::uint32_t kF16MinNormal = 0x38800000u;
// 2^-25, half the smallest subnormal: at or below it everything rounds to zero.
constexpr std::uint32_t kF16HalfMinSubnormal = 0x33000000u;

std::uint16_t f16_nan(std::uint32_t sign, std::uint32_t abs_bits) {
  // Quiet bit set, top payload bits kept, never a zero mantissa.
  return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs_bits >> 13) & 0x3ffu));
}

// f16 subnormal from an f32 below 2^-14: q = |x| / 2^-24 with the discarded
// bits resolved by `round_up(q, remainder, half)`.
template <class RoundUp>
std::uint16_t f16_subnormal(std::uint32_t sign, std::uint32_t abs_bits, RoundUp round_up) {
  const std::uint32_t exponent = abs_bits >> 23;
  const std::uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;  // 14..24 for the subnormal range
  if (shift > 24u) return static_cast<std::uint16_t>(sign);
  std::uint32_t q = mantissa >> shift;
  const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
  if (round_up(q, remainder, shift)) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

}  // namespace

std::size_t dtype_size(DType type) noexcept {
  switch (type) {
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
  }
  return 0;
}

std::string_view dtype_name(DType type) noexcept {
  switch (type) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  if (name == "f32" || name == "fp32" || name == "float32" || name == "float") return DType::f32;
  if (name == "f16" || name == "fp16" || name == "float16" || name == "half") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "i32" || name == "int32") return DType::i32;
  if (name == "i64" || name == "int64") return DType::i64;
  return std::nullopt;
}

bool is_floating(DType type) noexcept {
  return type == DType::f32 || type == DType::f16 || type == DType::bf16;
}

std::uint16_t f32_to_f16_bits(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t abs_bits = bits & kF32AbsMask;
  if (abs_bits > kF32Inf) return f16_nan(sign, abs_bits);
  if (abs_bits >= kF16OverflowThreshold) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (abs_bits >= kF16MinNormal) {
    std::uint32_t r = abs_bits - kF16Rebias;
    r += 0xfffu + ((r >> 13) & 1u);  // round to nearest, ties to even
    return static_cast<std::uint16_t>(sign | (r >> 13));
  }
  if (abs_bits <= kF16HalfMinSubnormal) return static_cast<std::uint16_t>(sign);
  return f16_subnormal(sign, abs_bits, [](std::uint32_t q, std::uint32_t rem, std::uint32_t shift) {
    const std::uint32_t half = 1u << (shift - 1u);
    return rem > half || (rem == half && (q & 1u));
  });
}

std::uint16_t f32_to_f16_bits_stochastic(float value, std::uint32_t random) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t abs_bits = bits & kF32AbsMask;
  if (abs_bits > kF32Inf) return f16_nan(sign, abs_bits);
  if (abs_bits == kF32Inf) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (abs_bits >= kF16MinNormal) {
    // Adding a uniform value below one ulp rounds up with probability equal
    // to the discarded fraction. Carries into the exponent are correct
    // rounding; past 65504 they reach infinity.
    std::uint64_t r = static_cast<std::uint64_t>(abs_bits - kF16Rebias) + (random >> 19);
    r >>= 13;
    if (r >= 0x7c00u) return static_cast<std::uint16_t>(sign | 0x7c00u);
    return static_cast<std::uint16_t>(sign | r);
  }
  return f16_subnormal(sign, abs_bits,
                       [random](std::uint32_t, std::uint32_t rem, std::uint32_t shift) {
                         // `shift` random bits against the `shift` discarded bits.
                         const std::uint32_t coin = random >> (32u - shift);
                         return rem + coin >= (1u << shift);
                       });
}

float f16_bits_to_f32(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return std::bit_cast<float>(sign | kF32Inf | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal or zero: mantissa * 2^-24 is exact in f32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

std::uint16_t f32_to_bf16_bits(float value) noexcept {
  return detail::bf16_bits_inline(value);
}

float bf16_bits_to_f32(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

float round_through(DType type, float value) noexcept {
  switch (type) {
    case DType::f16:
      return f16_bits_to_f32(f32_to_f16_bits(value));
    case DType::bf16:
      return bf16_bits_to_f32(f32_to_bf16_bits(value));
    default:
      return value;
  }
}

namespace {

double load_as_double(const void* src, DType type, std::size_t i) {
  switch (type) {
    case DType::f32:
      return static_cast<const float*>(src)[i];
    case DType::f16:
      return f16_bits_to_f32(static_cast<const std::uint16_t*>(src)[i]);
    case DType::bf16:
      return bf16_bits_to_f32(static_cast<const std::uint16_t*>(src)[i]);
    case DType::i32:
      return static_cast<const std::int32_t*>(src)[i];
    case DType::i64:
      return static_cast<double>(static_cast<const std::int64_t*>(src)[i]);
  }
  return 0.0;
}

template <class Int>
Int saturate(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<Int>::min())) {
    return std::numeric_limits<Int>::min();
  }
  if (v >= static_cast<double>(std::numeric_limits<Int>::max())) {
    return std::numeric_limits<Int>::max();
  }
  return static_cast<Int>(v);  // truncates toward zero
}

void store_from_double(void* dst, DType type, std::size_t i, double v) {
  switch (type) {
    case DType::f32:
      static_cast<float*>(dst)[i] = static_cast<float>(v);
      break;
    case DType::f16:
      static_cast<std::uint16_t*>(dst)[i] = f32_to_f16_bits(static_cast<float>(v));
      break;
    case DType::bf16:
      static_cast<std::uint16_t*>(dst)[i] = f32_to_bf16_bits(static_cast<float>(v));
      break;
    case DType::i32:
      static_cast<std::int32_t*>(dst)[i] = saturate<std::int32_t>(v);
      break;
    case DType::i64:
      static_cast<std::int64_t*>(dst)[i] = saturate<std::int64_t>(v);
      break;
  }
}

}  // namespace

void convert(const void* src, DType from, void* dst, DType to, std::size_t count) {
  if (from == to) {
    std::memcpy(dst, src, count * dtype_size(from));
    return;
  }
  // Fast paths for the conversions hot in mixed precision.
  if (from == DType::f32 && to == DType::bf16) {
    const auto* s = static_cast<const float*>(src);
    auto* d = static_cast<std::uint16_t*>(dst);
    for (std::size_t i = 0; i < count; ++i) d[i] = detail::bf16_bits_inline(s[i]);
    return;
  }
  if (from == DType::bf16 && to == DType::f32) {  // exact: the bf16 bits are the f32's top half
    const auto* s = static_cast<const std::uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    for (std::size_t i = 0; i < count; ++i)
      d[i] = std::bit_cast<float>(static_cast<std::uint32_t>(s[i]) << 16);
    return;
  }
  if (from == DType::f32 && to == DType::f16) {
    const auto* s = static_cast<const float*>(src);
    auto* d = static_cast<std::uint16_t*>(dst);
    for (std::size_t i = 0; i < count; ++i) d[i] = f32_to_f16_bits(s[i]);
    return;
  }
  // Through double: it holds every f16, bf16, f32 and i32 value exactly, so
  // those conversions round once. Only i64 beyond 2^53 to a 16-bit float can
  // round twice, which no workload produces.
  for (std::size_t i = 0; i < count; ++i)
    store_from_double(dst, to, i, load_as_double(src, from, i));
}

}  // namespace polyhal
