// Exhaustive checks of the f16 and bf16 conversions against independent
// references: the x86 F16C instruction (hardware IEEE conversion) and the
// definition of round-to-nearest-even written out on doubles.
#include <gtest/gtest.h>
#include <immintrin.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "polyhal/dtype.hpp"

namespace polyhal {
namespace {

// The value of a binary16 pattern from its fields, as the standard defines it.
double f16_value_by_definition(std::uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31)
    return mantissa ? std::nan("") : sign * std::numeric_limits<double>::infinity();
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// Counts patterns in [0, 2^32) where `check(bits)` fails, over both cores.
template <class Check>
std::uint64_t count_failures(Check check) {
  return tbb::parallel_reduce(
      tbb::blocked_range<std::uint64_t>(0, 1ull << 32, 1 << 16), std::uint64_t{0},
      [&](const auto& range, std::uint64_t failures) {
        for (std::uint64_t i = range.begin(); i < range.end(); ++i) {
          if (!check(static_cast<std::uint32_t>(i))) ++failures;
        }
        return failures;
      },
      std::plus<>());
}

TEST(DType, F16ToF32MatchesDefinitionForAll65536Patterns) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_bits_to_f32(static_cast<std::uint16_t>(h));
    const double want = f16_value_by_definition(static_cast<std::uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      ASSERT_EQ(std::signbit(got), (h >> 15) != 0) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << "pattern " << h;
      ASSERT_EQ(std::signbit(got), (h >> 15) != 0) << h;
    }
  }
}

TEST(DType, F16RoundTripIsExactForEveryNonNanPattern) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    if (std::isnan(f16_bits_to_f32(bits))) continue;
    ASSERT_EQ(f32_to_f16_bits(f16_bits_to_f32(bits)), bits) << h;
  }
}

TEST(DType, F32ToF16MatchesHardwareF16cForAll2To32Inputs) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C to compare against";
  const auto failures = count_failures([](std::uint32_t bits) {
    const float x = std::bit_cast<float>(bits);
    const auto hardware = static_cast<std::uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
    return f32_to_f16_bits(x) == hardware;
  });
  EXPECT_EQ(failures, 0u);
}

TEST(DType, F32ToF16IsNearestEvenByDefinitionOnASample) {
  // All finite f16 values in increasing order, as doubles.
  std::vector<std::pair<double, std::uint16_t>> table;
  for (std::uint32_t h = 0; h < 0x7c00; ++h)
    table.emplace_back(f16_value_by_definition(static_cast<std::uint16_t>(h)), h);
  std::mt19937 generator(7);
  for (int trial = 0; trial < 2'000'000; ++trial) {
    const auto bits = static_cast<std::uint32_t>(generator() & 0x7fffffffu);
    const float x = std::bit_cast<float>(bits);
    if (std::isnan(x)) continue;
    const double v = x;
    std::uint16_t want;
    if (v >= 65520.0) {
      want = 0x7c00;  // at or past max + half an ulp: infinity
    } else {
      auto hi = std::lower_bound(table.begin(), table.end(), std::make_pair(v, std::uint16_t{0}));
      if (hi == table.end()) hi = std::prev(table.end());
      auto lo = hi == table.begin() ? hi : std::prev(hi);
      if (hi->first == v) {
        want = hi->second;
      } else {
        const double down = v - lo->first, up = hi->first - v;
        want = down < up   ? lo->second
               : up < down ? hi->second
                           : ((lo->second & 1) ? hi->second : lo->second);
      }
    }
    ASSERT_EQ(f32_to_f16_bits(x), want) << "x=" << x;
    ASSERT_EQ(f32_to_f16_bits(-x), want | 0x8000) << "x=" << -x;
  }
}

TEST(DType, F32ToBf16IsNearestEvenByDefinitionForAll2To32Inputs) {
  const auto failures = count_failures([](std::uint32_t bits) {
    const float x = std::bit_cast<float>(bits);
    const std::uint16_t got = f32_to_bf16_bits(x);
    if (std::isnan(x)) {
      return std::isnan(bf16_bits_to_f32(got)) && (got >> 15) == (bits >> 31) && (got & 0x40);
    }
    // Candidates: truncation and the next pattern up in magnitude. Past the
    // largest finite value the next one is infinity, whose rounding
    // threshold behaves as if it were 2^128.
    const auto lo = static_cast<std::uint16_t>(bits >> 16);
    const auto hi = static_cast<std::uint16_t>(lo + 1);
    const double a = std::fabs(static_cast<double>(x));
    const double lo_value = std::fabs(static_cast<double>(bf16_bits_to_f32(lo)));
    const double hi_value = (hi & 0x7fff) == 0x7f80
                                ? std::ldexp(1.0, 128)
                                : std::fabs(static_cast<double>(bf16_bits_to_f32(hi)));
    std::uint16_t want;
    if (std::isinf(a) || a == lo_value) {
      want = lo;
    } else {
      const double down = a - lo_value, up = hi_value - a;
      want = down < up ? lo : up < down ? hi : ((lo & 1) ? hi : lo);
    }
    return got == want;
  });
  EXPECT_EQ(failures, 0u);
}

TEST(DType, Bf16ToF32IsExactUpperHalf) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_bits_to_f32(static_cast<std::uint16_t>(h));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f), h << 16);
  }
}

TEST(DType, SpecialValuesKeepTheirMeaning) {
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);   // largest finite
  EXPECT_EQ(f32_to_f16_bits(65519.99f), 0x7bff);  // just below the midpoint
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);   // tie rounds to even: infinity
  EXPECT_EQ(f32_to_f16_bits(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_f16_bits(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(0x1p-25f), 0x0000);  // half of it: tie to even zero
  EXPECT_EQ(f32_to_f16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);  // tie: stays at even 1.0
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(f32_to_bf16_bits(std::bit_cast<float>(0x00000001u)), 0x0000);  // f32 subnormal
  EXPECT_EQ(f32_to_bf16_bits(std::bit_cast<float>(0x7f800001u)) & 0x7fc0, 0x7fc0);  // sNaN -> qNaN
}

TEST(DType, StochasticRoundingRoundsUpWithTheDiscardedFraction) {
  // 1 + 1/4 ulp of f16 (ulp at 1.0 is 2^-10): rounds up about 25% of the time.
  const float x = 1.0f + 0x1p-12f;
  std::mt19937 generator(11);
  int up = 0;
  constexpr int kTrials = 200000;
  for (int i = 0; i < kTrials; ++i) {
    const auto bits = f32_to_f16_bits_stochastic(x, static_cast<std::uint32_t>(generator()));
    ASSERT_TRUE(bits == 0x3c00 || bits == 0x3c01) << bits;
    up += bits == 0x3c01;
  }
  EXPECT_NEAR(static_cast<double>(up) / kTrials, 0.25, 0.01);
  // Representable values never move, whatever the coin.
  for (std::uint32_t r : {0u, 0x7fffffffu, 0xffffffffu})
    EXPECT_EQ(f32_to_f16_bits_stochastic(1.5f, r), 0x3e00);
  // Subnormal range: 1/2 of the smallest subnormal rounds up half the time.
  int sub_up = 0;
  for (int i = 0; i < kTrials; ++i)
    sub_up += f32_to_f16_bits_stochastic(0x1p-25f, static_cast<std::uint32_t>(generator())) == 1;
  EXPECT_NEAR(static_cast<double>(sub_up) / kTrials, 0.5, 0.01);
}

TEST(DType, ConvertSaturatesIntegersAndPassesFloatsExactly) {
  const std::vector<float> src{1.5f, -2.7f, 3e10f, -3e10f, NAN};
  std::vector<std::int32_t> ints(src.size());
  convert(src.data(), DType::f32, ints.data(), DType::i32, src.size());
  EXPECT_EQ(ints, (std::vector<std::int32_t>{1, -2, INT32_MAX, INT32_MIN, 0}));
  std::vector<std::uint16_t> halves(2);
  const std::vector<std::int32_t> small{3, -70000};
  convert(small.data(), DType::i32, halves.data(), DType::f16, 2);
  EXPECT_EQ(halves[0], f32_to_f16_bits(3.0f));
  EXPECT_EQ(halves[1], 0xfc00);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_FALSE(parse_dtype("f8").has_value());
}

}  // namespace
}  // namespace polyhal
