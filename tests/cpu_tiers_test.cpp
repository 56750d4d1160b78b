// Every precision at every ISA tier of the CPU plugin this host can run
// (device.isa caps oneDNN at the tier): what `polyhal devices` says of the
// precision is what the kernels do. A native or emulated precision runs and
// agrees with the portable reference kernel; a refused one is refused at
// prepare, with its reason. The whole model per tier: bert_golden_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include "cpu_tiers.hpp"
#include "linear_problem.hpp"
#include "polyhal/error.hpp"
#include "polyhal/int8.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

using namespace test;  // the linear problems (linear_problem.hpp)

std::string property(const Device& device, const std::string& name) {
  for (const auto& row : device.properties().table)
    if (row.name == name) return row.value;
  return {};
}

/// `desc` is refused at prepare with a message that says why.
void expect_refused(Device& cpu, const KernelDesc& desc, const PrecisionMode& mode) {
  try {
    cpu.prepare_kernel(desc);
    ADD_FAILURE() << mode.precision << " prepared, though the device says: " << mode.why;
  } catch (const KernelNotFoundError& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

class CpuTier : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuTier, EveryPrecisionRunsAsTheDeviceSays) {
  const std::string tier = GetParam();
  POLYHAL_SKIP_TIER_ABOVE_HOST(tier);
  auto cpu = first_device("cpu", {{"isa", tier}});
  EXPECT_EQ(property(*cpu, "isa"), tier);
  const auto mode = [&](const char* precision) {
    return precision_mode(cpu->properties(), precision);
  };
  ASSERT_EQ(mode("f32").support, PrecisionSupport::native);

  // f32: the exact result, within f32 accumulation.
  const LinearProblem f32 = make_problem(DType::f32);
  auto kernel = cpu->prepare_kernel(linear_desc(f32, DType::f32, LinearMath::native));
  EXPECT_LE(max_difference(run_linear(*cpu, *kernel, f32, DType::f32), f32_expected(f32)), 2e-4)
      << kernel->implementation();

  // bf16 tensors: the reference's bf16 rounding, within one bf16 ulp.
  const LinearProblem bf16 = make_problem(DType::bf16);
  const auto bf16_desc = linear_desc(bf16, DType::bf16, LinearMath::native);
  if (mode("bf16").support == PrecisionSupport::none) {
    expect_refused(*cpu, bf16_desc, mode("bf16"));
  } else {
    auto got = cpu->prepare_kernel(bf16_desc);
    const auto want = run_linear(*cpu, *reference_kernel(bf16_desc, *cpu), bf16, DType::bf16);
    EXPECT_LE(max_difference(run_linear(*cpu, *got, bf16, DType::bf16),
                             std::vector<double>(want.begin(), want.end())),
              0.07)
        << got->implementation();
  }

  // bf32 and f16: f32 tensors, products of operands rounded to the narrow type.
  if (mode("bf32").support == PrecisionSupport::none)
    expect_refused(*cpu, linear_desc(f32, DType::f32, LinearMath::bf16_products), mode("bf32"));
  else
    expect_narrow_products(*cpu, LinearMath::bf16_products, DType::bf16, 1e-3, 1e-3);
  ASSERT_NE(mode("f16").support, PrecisionSupport::none);
  expect_narrow_products(*cpu, LinearMath::f16_products, DType::f16, 1e-4, 1e-5);

  // int8: the same integers as the rule (dynamic, static, u8 after GELU):
  // the reference kernel's on VNNI and AMX, seven-bit weights below them.
  const PrecisionMode int8 = mode("int8");
  const bool vnni = tier.find("vnni") != std::string::npos ||
                    tier.find("amx") != std::string::npos || tier == "avx512_core_bf16" ||
                    tier == "avx512_core_fp16";
  if (tier == "reference") {
    EXPECT_EQ(int8.support, PrecisionSupport::none) << int8.why;
    expect_refused(*cpu, linear_desc(f32, DType::f32, LinearMath::int8), int8);
    return;
  }
  ASSERT_EQ(int8.support, PrecisionSupport::native) << int8.why;
  EXPECT_EQ(int8.why.find("seven-bit") == std::string::npos, vnni) << int8.why;
  for (const bool gelu : {false, true}) {
    for (const float input_scale : {0.0f, int8_scale(f32.x_max)}) {
      if (gelu && input_scale > 0.0f) continue;
      const LinearProblem p = gelu ? gelu_input(f32, DType::f32) : f32;
      const auto desc = linear_desc(p, DType::f32, LinearMath::int8, input_scale,
                                    gelu ? Activation::gelu : Activation::none);
      auto got = cpu->prepare_kernel(desc);
      const std::vector<double> want =
          vnni ? to_double(run_linear(*cpu, *reference_kernel(desc, *cpu), p, DType::f32))
               : int8_expected(p, input_scale, gelu, kInt7Max);
      EXPECT_LE(max_difference(run_linear(*cpu, *got, p, DType::f32), want), 1e-4)
          << got->implementation() << (gelu ? " gelu u8" : "") << " step " << input_scale;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ladder, CpuTier, ::testing::ValuesIn(cpu_tier_names()), tier_param_name);

}  // namespace
}  // namespace polyhal
