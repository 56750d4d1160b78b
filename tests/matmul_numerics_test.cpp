// Matmul numerics on every backend against a reference computed here in
// double from the same rounded inputs, with each device's rounding rules.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_support.hpp"

namespace polyhal {
namespace {

struct Problem {
  std::int64_t m = 33, n = 47, k = 65;  // odd sizes catch tail handling
  std::vector<float> a, b;              // already representable in the input dtype
};

Problem make_problem(DType type) {
  Problem p;
  std::mt19937 generator(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  p.a.resize(static_cast<std::size_t>(p.m * p.k));
  p.b.resize(static_cast<std::size_t>(p.k * p.n));
  for (auto& v : p.a) v = round_through(type, uniform(generator));
  for (auto& v : p.b) v = round_through(type, uniform(generator));
  return p;
}

double exact(const Problem& p, std::int64_t i, std::int64_t j) {
  double sum = 0.0;
  for (std::int64_t q = 0; q < p.k; ++q)
    sum += static_cast<double>(p.a[i * p.k + q]) * p.b[q * p.n + j];
  return sum;
}

/// Runs C = A x B on `device` and returns C as f32.
std::vector<float> run_matmul(Device& device, const Problem& p, DType type, DType out) {
  auto kernel =
      device.prepare_kernel({OpKind::matmul, type, {{p.m, p.k}, {p.k, p.n}}, MatmulAttrs{out}});
  Tensor a = device.allocate_tensor(type, {p.m, p.k}, "A");
  Tensor b = device.allocate_tensor(type, {p.k, p.n}, "B");
  Tensor c = device.allocate_tensor(out, {p.m, p.n}, "C");
  std::vector<std::byte> staging(a.bytes());
  convert(p.a.data(), DType::f32, staging.data(), type, p.a.size());
  device.copy_from_host(*a.buffer, staging.data(), a.bytes());
  staging.resize(b.bytes());
  convert(p.b.data(), DType::f32, staging.data(), type, p.b.size());
  device.copy_from_host(*b.buffer, staging.data(), b.bytes());
  const std::array inputs{a, b};
  const std::array outputs{c};
  kernel->run(inputs, outputs);
  std::vector<float> result(static_cast<std::size_t>(p.m * p.n));
  convert(c.buffer->data(), out, result.data(), DType::f32, result.size());
  return result;
}

/// Max |got - exact| relative to the output's rounding unit: f32 accumulate
/// then one rounding to `out` keeps every element within one unit of `out`
/// (plus f32 accumulation error, tiny at k=65).
void expect_correctly_rounded(const Problem& p, const std::vector<float>& got, DType out,
                              double slack) {
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      const double want = exact(p, i, j);
      const double unit = out == DType::f32    ? 1e-6
                          : out == DType::bf16 ? std::ldexp(std::fabs(want), -8)
                                               : std::ldexp(std::fabs(want), -11);
      ASSERT_NEAR(got[i * p.n + j], want, unit + slack) << "(" << i << ", " << j << ")";
    }
  }
}

TEST(MatMulNumerics, CpuF32MatchesExactWithin1e5) {
  auto cpu = test::first_device("cpu");
  const auto p = make_problem(DType::f32);
  expect_correctly_rounded(p, run_matmul(*cpu, p, DType::f32, DType::f32), DType::f32, 1e-5);
}

TEST(MatMulNumerics, CpuBf16AccumulatesInF32) {
  auto cpu = test::first_device("cpu");
  if (!cpu->supports(DType::bf16)) GTEST_SKIP() << "no AVX-512 here";
  const auto p = make_problem(DType::bf16);
  // f32 output: bf16 products are exact in f32, so only f32 summation error remains.
  expect_correctly_rounded(p, run_matmul(*cpu, p, DType::bf16, DType::f32), DType::f32, 1e-5);
  expect_correctly_rounded(p, run_matmul(*cpu, p, DType::bf16, DType::bf16), DType::bf16, 1e-5);
}

TEST(MatMulNumerics, GaudiBf16RoundsOnceFromF32) {
  auto gaudi = test::first_device("gaudi");
  const auto p = make_problem(DType::bf16);
  const auto got = run_matmul(*gaudi, p, DType::bf16, DType::bf16);
  expect_correctly_rounded(p, got, DType::bf16, 1e-6);
  // Exactly the bf16 rounding of the f32 sum: every output is representable.
  for (float v : got) ASSERT_EQ(round_through(DType::bf16, v), v);
}

TEST(MatMulNumerics, IpuF16WithF32PartialsRoundsOnce) {
  auto ipu = test::first_device("ipu");
  const auto p = make_problem(DType::f16);
  expect_correctly_rounded(p, run_matmul(*ipu, p, DType::f16, DType::f16), DType::f16, 1e-6);
}

TEST(MatMulNumerics, IpuF16PartialsLoseMoreThanF32Partials) {
  const auto p = make_problem(DType::f16);
  auto f32_partials = test::first_device("ipu");
  auto f16_partials = test::first_device("ipu", {{"partials", "f16"}});
  const auto a = run_matmul(*f32_partials, p, DType::f16, DType::f32);
  const auto b = run_matmul(*f16_partials, p, DType::f16, DType::f32);
  double error_a = 0, error_b = 0;
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      error_a += std::fabs(a[i * p.n + j] - exact(p, i, j));
      error_b += std::fabs(b[i * p.n + j] - exact(p, i, j));
      // Every running sum was an f16 value, so the result is one too.
      ASSERT_EQ(round_through(DType::f16, b[i * p.n + j]), b[i * p.n + j]);
    }
  }
  EXPECT_GT(error_b, 10 * error_a) << "f16 accumulation must be visibly less accurate";
}

TEST(MatMulNumerics, IpuStochasticRoundingIsUnbiasedAndSeeded) {
  const auto p = make_problem(DType::f16);
  auto sr = test::first_device("ipu", {{"stochastic_rounding", "true"}, {"seed", "3"}});
  auto sr_same = test::first_device("ipu", {{"stochastic_rounding", "true"}, {"seed", "3"}});
  const auto first = run_matmul(*sr, p, DType::f16, DType::f16);
  EXPECT_EQ(first, run_matmul(*sr_same, p, DType::f16, DType::f16)) << "same seed, same bits";
  double bias = 0;
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) bias += first[i * p.n + j] - exact(p, i, j);
  }
  EXPECT_LT(std::fabs(bias / static_cast<double>(p.m * p.n)), 1e-3);
  // Stochastic rounding lands on one of the two neighbours: within one ulp.
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      const double want = exact(p, i, j);
      const double ulp = std::ldexp(1.0, std::ilogb(std::fabs(want)) - 10);
      ASSERT_LE(std::fabs(first[i * p.n + j] - want), ulp) << "(" << i << ", " << j << ")";
    }
  }
}

}  // namespace
}  // namespace polyhal
