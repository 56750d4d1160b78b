// The CPU linear's packed weights (plugins/cpu/onednn_linear.cpp):
// - where oneDNN asks for plain [K, N] weights (its f32 GEMM up to AVX2) and
//   a row is a multiple of 2 KiB, they are packed with longer rows, and the
//   layer still computes the f32 result;
// - kernels given the same weights share one packed copy
//   (plugins/cpu/packed_weights.hpp), and new values in the same buffer are
//   packed anew; int8 kernels share their quantised copy, but not across
//   different smoothing;
// - int8 kernels of many row counts run in one buffer per thread
//   (plugins/cpu/thread_scratch.hpp), not one each.
#include <gtest/gtest.h>

#include <malloc.h>

#include <fstream>
#include <string>

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

/// This process's resident memory in bytes (Linux), after handing freed
/// heap pages back (glibc keeps them resident otherwise).
std::int64_t resident_bytes() {
  malloc_trim(0);
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

/// How much five kernels of 16 to 80 rows given one W[8192, 1024] (32 MiB
/// of f32) with `math` grow the process beyond the first of them.
std::int64_t growth_of_four_more_kernels(Device& cpu, LinearMath math) {
  const LinearProblem p = make_problem(DType::f32, 16, 1024, 8192);
  const Tensor w = upload(cpu, DType::f32, {p.n, p.k}, p.w);
  const Tensor b = upload(cpu, DType::f32, {p.n}, p.b);
  std::vector<std::shared_ptr<Kernel>> kernels;
  for (const std::int64_t rows : {16, 32, 48, 64, 80}) {
    LinearProblem shape = p;
    shape.m = rows;
    kernels.push_back(cpu.prepare_kernel(linear_desc(shape, DType::f32, math)));
  }
  kernels[0]->set_constants(std::array{w, b});
  const std::int64_t one = resident_bytes();
  for (std::size_t i = 1; i < kernels.size(); ++i) kernels[i]->set_constants(std::array{w, b});
  return resident_bytes() - one;
}

TEST(CpuLinear, KernelsGivenTheSameWeightsShareOnePackedCopy) {
  auto cpu = first_device("cpu");
  // 32 MiB of weights: four more copies would add 128 MiB.
  const std::int64_t growth = growth_of_four_more_kernels(*cpu, LinearMath::native);
  EXPECT_LT(growth, std::int64_t{16} << 20)
      << "four more kernels on the same weights grew the process by " << (growth >> 20) << " MiB";
}

TEST(CpuLinear, NewWeightsInTheSameBufferArePackedAnew) {
  auto cpu = first_device("cpu");
  LinearProblem p = make_problem(DType::f32, 37, 96, 512);
  auto first = cpu->prepare_kernel(linear_desc(p, DType::f32, LinearMath::native));
  auto second = cpu->prepare_kernel(linear_desc(p, DType::f32, LinearMath::native));
  EXPECT_LE(max_difference(run_linear(*cpu, *first, p, DType::f32), f32_expected(p)), 2e-4);
  // run_linear uploads W into a new buffer each time; the same buffer with
  // new values is what a reload does.
  const Tensor w = upload(*cpu, DType::f32, {p.n, p.k}, p.w);
  const Tensor b = upload(*cpu, DType::f32, {p.n}, p.b);
  first->set_constants(std::array{w, b});
  for (float& v : p.w) v = -v;
  cpu->copy_from_host(*w.buffer, p.w.data(), w.bytes());
  second->set_constants(std::array{w, b});
  const std::array inputs{upload(*cpu, DType::f32, {p.m, p.k}, p.x),
                          upload(*cpu, DType::f32, {p.m, p.n}, p.r)};
  const std::array outputs{cpu->allocate_tensor(DType::f32, {p.m, p.n}, "Y")};
  second->run(inputs, outputs);
  std::vector<float> y(static_cast<std::size_t>(p.m * p.n));
  cpu->copy_to_host(y.data(), *outputs[0].buffer, outputs[0].bytes());
  EXPECT_LE(max_difference(y, f32_expected(p)), 2e-4) << "the second kernel ran the old weights";
}

TEST(CpuLinear, Int8KernelsShareTheirQuantisedCopyButNotAcrossSmoothing) {
  if (const auto why = cpu_without_int8()) GTEST_SKIP() << *why;
  auto cpu = first_device("cpu");
  // 8 MiB quantised: four more copies would add 32 MiB.
  const std::int64_t growth = growth_of_four_more_kernels(*cpu, LinearMath::int8);
  EXPECT_LT(growth, std::int64_t{4} << 20)
      << "four more int8 kernels on the same weights grew the process by " << (growth >> 20)
      << " MiB";

  // Two kernels on one weight buffer, smoothed differently: each computes
  // with its own smoothing.
  const LinearProblem p = make_problem(DType::f32);
  const Tensor w = upload(*cpu, DType::f32, {p.n, p.k}, p.w);
  const Tensor b = upload(*cpu, DType::f32, {p.n}, p.b);
  const auto desc = linear_desc(p, DType::f32, LinearMath::int8);
  std::vector<float> first_s(static_cast<std::size_t>(p.k)), second_s(first_s.size());
  for (std::size_t i = 0; i < first_s.size(); ++i) {
    first_s[i] = 0.5f + 0.01f * static_cast<float>(i);
    second_s[i] = 2.0f - 0.01f * static_cast<float>(i);
  }
  const std::array inputs{upload(*cpu, DType::f32, {p.m, p.k}, p.x),
                          upload(*cpu, DType::f32, {p.m, p.n}, p.r)};
  std::vector<std::shared_ptr<Kernel>> smoothed;  // both alive: the first one's copy stays
  for (const auto* s : {&first_s, &second_s}) {
    auto& kernel = smoothed.emplace_back(cpu->prepare_kernel(desc));
    kernel->set_constants(std::array{w, b, upload(*cpu, DType::f32, {p.k}, *s)});
    const std::array outputs{cpu->allocate_tensor(DType::f32, {p.m, p.n}, "Y")};
    kernel->run(inputs, outputs);
    std::vector<float> y(static_cast<std::size_t>(p.m * p.n));
    cpu->copy_to_host(y.data(), *outputs[0].buffer, outputs[0].bytes());
    EXPECT_LE(max_difference(y, cpu_int8_want(*cpu, desc, p, DType::f32, s)), 1e-4)
        << (s == &first_s ? "first" : "second") << " smoothing";
  }
}

TEST(CpuLinear, Int8KernelsOfManyRowCountsRunInOneScratch) {
  if (const auto why = cpu_without_int8()) GTEST_SKIP() << *why;
  auto cpu = first_device("cpu");
  // A server's shapes: 1,024 to 3,072 rows of X[., 1024] into 4,096 outputs.
  // Each run's quantised X and oneDNN's scratch take 1 to 3 MiB and more;
  // kept per kernel, the four smaller kernels would add them all.
  const LinearProblem p = make_problem(DType::f32, 3072, 1024, 4096);
  const Tensor w = upload(*cpu, DType::f32, {p.n, p.k}, p.w);
  const Tensor b = upload(*cpu, DType::f32, {p.n}, p.b);
  const Tensor x = upload(*cpu, DType::f32, {p.m, p.k}, p.x);
  const Tensor r = upload(*cpu, DType::f32, {p.m, p.n}, p.r);
  const Tensor y = cpu->allocate_tensor(DType::f32, {p.m, p.n}, "Y");
  std::vector<std::int8_t> touch(static_cast<std::size_t>(y.bytes()), 1);
  cpu->copy_from_host(*y.buffer, touch.data(), touch.size());  // Y resident before measuring
  const std::vector<std::int64_t> row_counts{3072, 2560, 2048, 1536, 1024};
  std::vector<std::shared_ptr<Kernel>> kernels;  // all kept, as a server keeps its shapes
  for (const std::int64_t rows : row_counts) {
    LinearProblem shape;  // the dimensions only
    shape.m = rows;
    shape.k = p.k;
    shape.n = p.n;
    kernels.push_back(cpu->prepare_kernel(linear_desc(shape, DType::f32, LinearMath::int8)));
    kernels.back()->set_constants(std::array{w, b});
  }
  const auto run = [&](std::size_t i) {
    const std::int64_t rows = row_counts[i];
    kernels[i]->run(std::array{row_slice(x, 0, rows), row_slice(r, 0, rows)},
                    std::array{row_slice(y, 0, rows)});
  };
  run(0);
  const std::int64_t after_first = resident_bytes();
  std::uint64_t smaller_bytes = 0;
  for (std::size_t i = 1; i < kernels.size(); ++i) {
    run(i);
    smaller_bytes += static_cast<std::uint64_t>(row_counts[i] * p.k);
  }
  const std::int64_t growth = resident_bytes() - after_first;
  EXPECT_LT(growth, static_cast<std::int64_t>(smaller_bytes / 4))
      << "four smaller int8 kernels grew the process by " << (growth >> 10) << " KiB (their "
      << "quantised inputs alone are " << (smaller_bytes >> 10) << " KiB)";
}

}  // namespace
}  // namespace polyhal
