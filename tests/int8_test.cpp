// INT8 and bf32 linears (LinearAttrs::math, int8.hpp): the quantisation
// rule, the reference kernel against a computation done here in double from
// the rule, the CPU plugin's oneDNN kernels against the reference, the
// refusals (an ISA without VNNI, the device models), and the scales file.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include "linear_problem.hpp"
#include "polyhal/app/int8_scales.hpp"
#include "polyhal/error.hpp"
#include "polyhal/int8.hpp"
#include "polyhal/reference_kernels.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

using namespace test;  // the linear problems (linear_problem.hpp)

TEST(Int8, QuantisationRoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(quantize_s8(2.5f, 1.0f), 2);
  EXPECT_EQ(quantize_s8(3.5f, 1.0f), 4);
  EXPECT_EQ(quantize_s8(-2.5f, 1.0f), -2);
  EXPECT_EQ(quantize_s8(1000.0f, 1.0f), 127);
  EXPECT_EQ(quantize_s8(-1000.0f, 1.0f), -128);
  EXPECT_EQ(quantize_s8(std::nanf(""), 1.0f), 0);
  EXPECT_EQ(int8_scale(0.0f), 1.0f);
  EXPECT_FLOAT_EQ(int8_scale(12.7f), 0.1f);
  // A row's own step: its largest value maps to 127.
  const std::vector<float> row{0.5f, -2.0f, 1.0f};
  std::vector<std::int8_t> q(3);
  EXPECT_FLOAT_EQ(quantize_row_s8(row, q), 2.0f / 127.0f);
  EXPECT_EQ(q, (std::vector<std::int8_t>{32, -127, 64}));  // 31.75 -> 32, 63.5 -> 64
}

TEST(Int8, ReferenceLinearFollowsTheRuleAndStaysNearF32) {
  const LinearProblem p = make_problem(DType::f32);
  auto device = test::first_device("ipu");  // any device: the kernel is the reference
  for (const float input_scale : {0.0f, int8_scale(p.x_max)}) {
    auto kernel =
        reference_kernel(linear_desc(p, DType::f32, LinearMath::int8, input_scale), *device);
    const auto y = run_linear(*device, *kernel, p, DType::f32);
    EXPECT_LE(max_difference(y, int8_expected(p, input_scale)), 1e-4) << input_scale;
    const double error = max_difference(y, f32_expected(p));
    std::cout << fmt::format("int8 ({}) vs f32 linear: max abs difference {:.4f}\n",
                             input_scale > 0 ? "static" : "dynamic", error);
    EXPECT_LE(error, 0.4);
    EXPECT_GT(error, 0.0);
  }
}

TEST(Int8, GeluInputsUseAllEightBits) {
  const LinearProblem p = gelu_input(make_problem(DType::f32), DType::f32);
  auto cpu = test::first_device("cpu");
  const auto desc = linear_desc(p, DType::f32, LinearMath::int8, 0.0f, Activation::gelu);
  auto reference = reference_kernel(desc, *cpu);
  const auto want = run_linear(*cpu, *reference, p, DType::f32);
  EXPECT_LE(max_difference(want, int8_expected(p, 0.0f, true)), 1e-4);
  // u8 halves the step of s8 on the same rows: closer to f32.
  auto s8 = reference_kernel(linear_desc(p, DType::f32, LinearMath::int8), *cpu);
  const double u8_error = max_difference(want, f32_expected(p));
  const double s8_error = max_difference(run_linear(*cpu, *s8, p, DType::f32), f32_expected(p));
  std::cout << fmt::format("GELU input vs f32: u8 {:.4f}, s8 {:.4f}\n", u8_error, s8_error);
  EXPECT_LT(u8_error, s8_error);
  for (const DType type : {DType::f32, DType::bf16}) {
    if (type == DType::bf16 && test::cpu_without_bf16()) continue;
    const LinearProblem q = gelu_input(make_problem(type), type);
    const auto typed = linear_desc(q, type, LinearMath::int8, 0.0f, Activation::gelu);
    auto kernel = cpu->prepare_kernel(typed);
    EXPECT_NE(kernel->implementation().find("u8"), std::string::npos) << kernel->implementation();
    const auto got = run_linear(*cpu, *kernel, q, type);
    EXPECT_LE(max_difference(got, cpu_int8_want(*cpu, typed, q, type)),
              type == DType::f32 ? 1e-4 : 0.07)
        << dtype_name(type);
  }
}

TEST(Int8, CpuKernelEqualsTheReference) {
  auto cpu = test::first_device("cpu");
  for (const DType type : {DType::f32, DType::bf16}) {
    if (type == DType::bf16 && test::cpu_without_bf16()) continue;
    const LinearProblem p = make_problem(type);
    for (const float input_scale : {0.0f, int8_scale(p.x_max)}) {
      const auto desc = linear_desc(p, type, LinearMath::int8, input_scale);
      auto kernel = cpu->prepare_kernel(desc);
      EXPECT_NE(kernel->implementation().find("int8"), std::string::npos);
      const auto got = run_linear(*cpu, *kernel, p, type);
      // Same integers; only oneDNN's GELU and the output rounding may differ.
      EXPECT_LE(max_difference(got, cpu_int8_want(*cpu, desc, p, type)),
                type == DType::f32 ? 1e-4 : 0.07)
          << dtype_name(type) << " " << kernel->implementation();
    }
  }
}

TEST(Int8, Bf32MultipliesBf16RoundedOperandsInF32) {
  if (const auto why = test::cpu_without_bf16()) GTEST_SKIP() << *why;
  auto cpu = test::first_device("cpu");
  const auto implementation =
      expect_narrow_products(*cpu, LinearMath::bf16_products, DType::bf16, 1e-3, 1e-3);
  EXPECT_NE(implementation.find("bf16 products"), std::string::npos);
}

// model.precision f16 on the CPU: f16 products of f32 tensors. With
// Debian's oneDNN 2.6 (no f16 matmul on any CPU) the operands are rounded to
// f16 and multiplied by the f32 kernel, and the kernel says so.
void expect_f16_products(Device& cpu) {
  const auto implementation =
      expect_narrow_products(cpu, LinearMath::f16_products, DType::f16, 1e-4, 1e-5);
  EXPECT_NE(implementation.find("f16 products"), std::string::npos) << implementation;
  if (implementation.find("f16-rounded operands on the f32 kernel") != std::string::npos) {
    EXPECT_NE(implementation.find("AMX-FP16"), std::string::npos) << "says why";
  }
}

TEST(Int8, F16ProductsMultiplyF16RoundedOperandsInF32) {
  expect_f16_products(*test::first_device("cpu"));
}

// The scalar rounding (device.isa below AVX-512) gives the same values. Its
// own test: oneDNN's ISA cap is process-wide.
TEST(Int8, F16ProductsWithoutAvx512RoundTheSame) {
  expect_f16_products(*test::first_device("cpu", {{"isa", "avx2"}}));
}

/// The problem's largest |x| per input channel, as a calibration records it.
std::vector<float> channel_max_abs(const LinearProblem& p) {
  std::vector<float> max_abs(static_cast<std::size_t>(p.k), 0.0f);
  for (std::size_t i = 0; i < p.x.size(); ++i) {
    float& m = max_abs[i % max_abs.size()];
    m = std::max(m, std::fabs(p.x[i]));
  }
  return max_abs;
}

// Smoothing (int8.hpp, SmoothQuant): X's outlier channels divided out and
// multiplied into W. The reference follows the rule exactly (the same as
// quantising X / s and W * s), the CPU kernel agrees with it, and the
// result is closer to f32 than without smoothing.
TEST(Int8, SmoothingTamesOutlierChannels) {
  auto cpu = test::first_device("cpu");
  for (const DType type : {DType::f32, DType::bf16}) {
    if (type == DType::bf16 && test::cpu_without_bf16()) continue;
    const LinearProblem p = make_problem(type);
    const auto s = int8_smoothing(channel_max_abs(p), p.w, p.n, p.k);
    const auto desc = linear_desc(p, type, LinearMath::int8);
    auto reference = reference_kernel(desc, *cpu);
    const auto want = run_linear(*cpu, *reference, p, type, &s);
    if (type == DType::f32) {
      LinearProblem moved = p;
      for (std::size_t i = 0; i < moved.x.size(); ++i) moved.x[i] *= 1.0f / s[i % s.size()];
      for (std::size_t i = 0; i < moved.w.size(); ++i) moved.w[i] *= s[i % s.size()];
      EXPECT_LE(max_difference(want, int8_expected(moved, 0.0f)), 1e-4);
      const double smoothed = max_difference(want, f32_expected(p));
      const double plain =
          max_difference(run_linear(*cpu, *reference_kernel(desc, *cpu), p, type), f32_expected(p));
      std::cout << fmt::format("outlier channels vs f32: smoothed {:.4f}, plain {:.4f}\n", smoothed,
                               plain);
      EXPECT_LT(smoothed, 0.6 * plain);
    }
    auto kernel = cpu->prepare_kernel(desc);
    const auto got = run_linear(*cpu, *kernel, p, type, &s);
    EXPECT_NE(kernel->implementation().find("smoothed"), std::string::npos)
        << kernel->implementation();
    EXPECT_LE(max_difference(got, cpu_int8_want(*cpu, desc, p, type, &s)),
              type == DType::f32 ? 1e-4 : 0.07)
        << dtype_name(type);
  }
}

// A third constant only where the rule has one, and only usable values.
TEST(Int8, SmoothingConstantIsChecked) {
  auto cpu = test::first_device("cpu");
  const LinearProblem p = make_problem(DType::f32);
  std::vector<float> s(static_cast<std::size_t>(p.k), 1.0f);
  s[5] = 0.0f;
  const std::vector<float> short_s(4, 1.0f);
  const std::vector<float> ones(static_cast<std::size_t>(p.k), 1.0f);
  for (const bool reference : {true, false}) {
    const auto make = [&](const KernelDesc& desc) {
      return reference ? std::shared_ptr<Kernel>(reference_kernel(desc, *cpu))
                       : std::shared_ptr<Kernel>(cpu->prepare_kernel(desc));
    };
    const auto dynamic = linear_desc(p, DType::f32, LinearMath::int8);
    EXPECT_THROW(run_linear(*cpu, *make(dynamic), p, DType::f32, &s), RuntimeFailure);
    EXPECT_THROW(run_linear(*cpu, *make(dynamic), p, DType::f32, &short_s), RuntimeFailure);
    const auto static_desc = linear_desc(p, DType::f32, LinearMath::int8, int8_scale(p.x_max));
    EXPECT_THROW(run_linear(*cpu, *make(static_desc), p, DType::f32, &ones), RuntimeFailure);
    const auto gelu_desc = linear_desc(p, DType::f32, LinearMath::int8, 0.0f, Activation::gelu);
    EXPECT_THROW(run_linear(*cpu, *make(gelu_desc), p, DType::f32, &ones), RuntimeFailure);
    const auto native = linear_desc(p, DType::f32, LinearMath::native);
    EXPECT_THROW(run_linear(*cpu, *make(native), p, DType::f32, &ones), RuntimeFailure);
  }
}

/// Runs `p` on the CPU at device.isa avx2 with dynamic X, a calibrated
/// step and a GELU input; the dynamic rows get a NaN (quantised to 0) at
/// x[3] and `infinity` (saturating) at x[infinity_at]. Each kernel's
/// implementation must name `path`, and its result equal the seven-bit int8
/// rule computed in double, within the f32 epilogue's rounding.
void expect_seven_bit_rule(const LinearProblem& p, std::size_t infinity_at, float infinity,
                           const std::string& path) {
  auto cpu = test::first_device("cpu", {{"isa", "avx2"}});
  for (const bool gelu : {false, true}) {
    for (const float input_scale : {0.0f, int8_scale(p.x_max)}) {
      if (gelu && input_scale > 0.0f) continue;
      LinearProblem q = gelu ? gelu_input(p, DType::f32) : p;
      if (input_scale == 0.0f) {
        q.x[3] = std::nanf("");
        q.x[infinity_at] = infinity;
      }
      const auto desc = linear_desc(q, DType::f32, LinearMath::int8, input_scale,
                                    gelu ? Activation::gelu : Activation::none);
      auto kernel = cpu->prepare_kernel(desc);
      EXPECT_NE(kernel->implementation().find(path), std::string::npos) << kernel->implementation();
      EXPECT_LE(max_difference(run_linear(*cpu, *kernel, q, DType::f32),
                               int8_expected(q, input_scale, gelu, kInt7Max)),
                1e-4)
          << p.m << " x " << p.k << " x " << p.n << " " << kernel->implementation();
    }
  }
}

// Below VNNI (device.isa avx2 on any x86 CPU) int8 runs with seven-bit
// weights, and its sums are exact: oneDNN's vpmaddubsw pair sums would
// saturate with eight-bit ones (up to 0.88 off on this problem).
// Rows of 101 (the AVX2 quantiser's tail); N 70 is not a multiple of 8, so
// this is oneDNN's matmul, not the convolution below.
TEST(Int8, BelowVnniRunsSevenBitWeightsWithExactSums) {
  expect_seven_bit_rule(make_problem(DType::f32, 37, 101, 70), 2 * 101 + 100,
                        std::numeric_limits<float>::infinity(), "seven-bit weights");
}

// Below VNNI, f32, N a multiple of 8: oneDNN's 1x1 convolution into s32
// sums and our epilogue over them in place (onednn_int8_linear.cpp): the
// same integer sums, at few rows and many. K 101 is not a multiple of 4;
// N 40 is of 8, not 16; 3 and 37 rows are odd.
TEST(Int8, BelowVnniConvolutionSumsAreExactAtAnyRowCount) {
  for (const auto& [m, k, n] :
       {std::array<std::int64_t, 3>{3, 64, 32}, {37, 96, 80}, {203, 96, 40}, {131, 101, 48}}) {
    expect_seven_bit_rule(make_problem(DType::f32, m, k, n), static_cast<std::size_t>(k + 5),
                          -std::numeric_limits<float>::infinity(), "1x1 convolution");
  }
}

// A residual that is the output's own memory (Y = linear(X) + Y) is read
// before the convolution's sums could be stored over it.
TEST(Int8, BelowVnniConvolutionAddsAResidualHeldInTheOutput) {
  const LinearProblem p = make_problem(DType::f32, 150, 64, 32);
  auto cpu = test::first_device("cpu", {{"isa", "avx2"}});
  auto kernel = cpu->prepare_kernel(linear_desc(p, DType::f32, LinearMath::int8));
  ASSERT_NE(kernel->implementation().find("1x1 convolution"), std::string::npos)
      << kernel->implementation();
  kernel->set_constants(std::vector<Tensor>{upload(*cpu, DType::f32, {p.n, p.k}, p.w),
                                            upload(*cpu, DType::f32, {p.n}, p.b)});
  const Tensor x = upload(*cpu, DType::f32, {p.m, p.k}, p.x);
  const Tensor y = upload(*cpu, DType::f32, {p.m, p.n}, p.r);
  kernel->run(std::array{x, y}, std::array{y});
  std::vector<float> got(p.r.size());
  convert(y.buffer->data(), DType::f32, got.data(), DType::f32, got.size());
  EXPECT_LE(max_difference(got, int8_expected(p, 0.0f, false, kInt7Max)), 1e-4);
}

TEST(Int8, DeviceModelsRefuseWhatTheirHardwareLacks) {
  const LinearProblem p = make_problem(DType::f32);
  auto ipu = test::first_device("ipu");
  for (const LinearMath math : {LinearMath::int8, LinearMath::bf16_products}) {
    try {
      ipu->prepare_kernel(linear_desc(p, DType::f32, math));
      ADD_FAILURE() << "the IPU model prepared " << linear_math_name(math);
    } catch (const KernelNotFoundError& e) {
      EXPECT_NE(std::string(e.what()).find("IPU"), std::string::npos) << e.what();
    }
  }
  auto gaudi = test::first_device("gaudi");
  try {
    gaudi->prepare_kernel(linear_desc(p, DType::bf16, LinearMath::int8));
    ADD_FAILURE() << "the Gaudi model prepared int8";
  } catch (const KernelNotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("MME"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(gaudi->prepare_kernel(linear_desc(p, DType::f32, LinearMath::bf16_products)));
}

/// Scales of `config` with every linear's largest |x| at 1.5.
Int8Scales test_scales(const BertConfig& config) {
  Int8Scales scales;
  scales.fingerprint = "fnv1a64:0123456789abcdef";
  scales.batches = 3;
  scales.precision = "f32";
  for (const auto& name : int8_linear_names(config)) scales.max_abs[name] = 1.5f;
  return scales;
}

TEST(Int8, ScalesFileErrorsNameTheFileAndKey) {
  test::TempDir dir;
  const BertConfig config = test::small_bert(2);
  const Int8Scales scales = test_scales(config);
  const auto file = dir.path() / "scales.json";
  write_int8_scales(file, config, scales);
  const auto back = read_int8_scales(file, config, "model.int8_scales");
  EXPECT_EQ(back.max_abs, scales.max_abs);
  EXPECT_EQ(back.fingerprint, scales.fingerprint);
  test::expect_config_error(
      [&] { check_int8_fingerprint(back, "fnv1a64:ffffffffffffffff", file, "model.int8_scales"); },
      "calibrated on other weights");
  BertConfig other = config;
  other.hidden_size *= 2;
  test::expect_config_error([&] { read_int8_scales(file, other, "model.int8_scales"); },
                            "calibrated for another model: hidden_size");
  const auto text = [&] {
    std::ifstream in(file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return dir.write("edited.json", t);
  };
  test::expect_config_error(
      [&] {
        read_int8_scales(edited("bert.encoder.layer.1.output.dense", "x"), config,
                         "model.int8_scales");
      },
      "no scale for linear \"bert.encoder.layer.1.output.dense\"");
  test::expect_config_error(
      [&] { read_int8_scales(edited("1.5,", "-1.5,"), config, "model.int8_scales"); },
      "is -1.5; a calibrated largest |x| is finite and from");
  // Issue 53 item 30: a scale a double holds and an f32 step does not.
  test::expect_config_error(
      [&] { read_int8_scales(edited("1.5,", "1e-300,"), config, "model.int8_scales"); },
      "is 1e-300; a calibrated largest |x| is finite and from 1.49");
  test::expect_config_error(
      [&] { read_int8_scales(dir.write("not.json", "{\"a\": 1}"), config, "model.int8_scales"); },
      "not an int8 scales file");
  // A dimension past int64's range (a fuzz finding: undefined behaviour in
  // the conversion), or a fraction: refused by name.
  test::expect_config_error(
      [&] {
        read_int8_scales(edited("\"hidden_size\": " + std::to_string(config.hidden_size),
                                "\"hidden_size\": 1e300"),
                         config, "model.int8_scales");
      },
      "\"hidden_size\" must be a whole number");
  test::expect_config_error(
      [&] {
        read_int8_scales(edited("\"batches\": 3", "\"batches\": 2.5"), config, "model.int8_scales");
      },
      "\"batches\" must be a whole number");
  test::expect_config_error(
      [&] { read_int8_scales(dir.path() / "missing.json", config, "model.int8_scales"); },
      "missing.json");
}

// Per-channel maxima (dynamic int8's smoothing): written for the LayerNorm-
// input linears only, read back, and each bad value named.
TEST(Int8, ScalesFileChannelMaxima) {
  test::TempDir dir;
  const BertConfig config = test::small_bert(2);
  Int8Scales scales = test_scales(config);
  for (const auto& name : int8_linear_names(config)) {
    scales.channel_max_abs[name] = std::vector<float>(static_cast<std::size_t>(config.hidden_size),
                                                      int8_smoothed(name) ? 2.5f : 3.5f);
  }
  const auto file = dir.path() / "scales.json";
  write_int8_scales(file, config, scales);
  const auto back = read_int8_scales(file, config, "model.int8_scales");
  ASSERT_EQ(back.channel_max_abs.size(), 2u * static_cast<std::size_t>(config.num_hidden_layers));
  for (const auto& [name, values] : back.channel_max_abs) {
    EXPECT_TRUE(int8_smoothed(name)) << name;
    EXPECT_EQ(values, scales.channel_max_abs.at(name));
  }
  std::ifstream in(file);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  EXPECT_EQ(text.find("3.5"), std::string::npos) << "only the smoothed linears' maxima";
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return dir.write("edited.json", t);
  };
  const std::string qkv0 = "\"bert.encoder.layer.0.attention.self.qkv\": [";
  test::expect_config_error(
      [&] { read_int8_scales(edited(qkv0, qkv0 + "1.0,"), config, "model.int8_scales"); },
      "must be 128 numbers (hidden_size)");
  test::expect_config_error(
      [&] { read_int8_scales(edited("2.5,", "-2.5,"), config, "model.int8_scales"); },
      "channel 0 of \"bert.encoder.layer.0.attention.self.qkv\" is -2.5");
  test::expect_config_error(
      [&] { read_int8_scales(edited(qkv0, "\"x\": ["), config, "model.int8_scales"); },
      "no per-channel maxima for linear \"bert.encoder.layer.0.attention.self.qkv\"");
}

}  // namespace
}  // namespace polyhal
