// The CPU linear's padded weight rows (plugins/cpu/onednn_linear.cpp): where
// oneDNN asks for plain [K, N] weights (its f32 GEMM up to AVX2) and a row
// is a multiple of 2 KiB, the weights are packed with longer rows, and the
// layer still computes the f32 result.
#include <gtest/gtest.h>

#include "cpu_tiers.hpp"
#include "linear_problem.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

using namespace test;  // the linear problems (linear_problem.hpp)

TEST(CpuLinear, PaddedWeightRowsComputeTheF32Result) {
  POLYHAL_SKIP_TIER_ABOVE_HOST("avx2");
  auto cpu = first_device("cpu", {{"isa", "avx2"}});
  // 512 f32 outputs: rows of 2 KiB, padded; 70: not.
  for (const std::int64_t n : {512, 70}) {
    const LinearProblem p = make_problem(DType::f32, 37, 96, n);
    auto kernel = cpu->prepare_kernel(linear_desc(p, DType::f32, LinearMath::native));
    const std::string implementation = kernel->implementation();
    EXPECT_EQ(implementation.find("weight rows padded") != std::string::npos, n == 512)
        << implementation;
    EXPECT_LE(max_difference(run_linear(*cpu, *kernel, p, DType::f32), f32_expected(p)), 2e-4)
        << implementation;
  }
}

}  // namespace
}  // namespace polyhal
