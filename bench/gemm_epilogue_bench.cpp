// The GEMM ceilings behind int8's speed-up: oneDNN's matmul on BERT's four
// encoder GEMM shapes, int8 (s8 x s8 -> s32, VNNI or AMX-INT8) and bf16,
// each raw and with the epilogue polyhal's linear fuses into it (int8: per-
// channel scales, the per-row step, bias; bf16: bias; both: GELU on FFN up).
// oneDNN directly (through the CPU plugin's version adapter, onednn_api.hpp,
// nothing else of polyhal), so the ceiling does not depend on polyhal's
// kernels. Prints a Markdown table.
//
//   build/bench/polyhal_gemm_epilogue_bench [tokens=1024] [hidden=768] [threads from
//   OMP_NUM_THREADS]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "onednn_api.hpp"

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct Shape {
  const char* name;
  long n, k;
  bool gelu;
};

/// Milliseconds per call and the implementation, of [1, m, k] x [1, k, n].
std::pair<double, std::string> time_matmul(const dnnl::engine& engine, long m, long n, long k,
                                           bool int8, bool epilogue, bool gelu) {
  dnnl::stream stream(engine);
  const dnnl::memory::desc src({1, m, k}, int8 ? dt::s8 : dt::bf16, tag::abc);
  const dnnl::memory::desc weights({1, k, n}, int8 ? dt::s8 : dt::bf16, tag::any);
  const dnnl::memory::desc dst({1, m, n}, dt::bf16, tag::abc);
  const dnnl::memory::desc row({1, m, 1}, dt::f32, tag::abc), bias({1, 1, n}, dt::f32, tag::abc);
  dnnl::primitive_attr attr;
  dnnl::post_ops post_ops;
  polyhal::cpu::onednn::Scales scales;
  if (epilogue) {
    if (int8) {
      scales = polyhal::cpu::onednn::Scales(
          attr, polyhal::cpu::onednn::Scales::Of::matmul_result, 1 << 2,
          std::vector<float>(static_cast<std::size_t>(n), 0.01f), engine);
      post_ops.append_binary(dnnl::algorithm::binary_mul, row);
    }
    post_ops.append_binary(dnnl::algorithm::binary_add, bias);
    if (gelu) polyhal::cpu::onednn::append_eltwise(post_ops, dnnl::algorithm::eltwise_gelu_erf);
  }
  attr.set_post_ops(post_ops);
  const dnnl::matmul::primitive_desc pd =
      polyhal::cpu::onednn::matmul(engine, src, weights, dst, attr);
  dnnl::memory s(src, engine), w(pd.weights_desc(), engine), d(dst, engine), r(row, engine),
      b(bias, engine);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, d}};
  if (epilogue) {
    int index = 0;
    if (int8) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(index++) | DNNL_ARG_SRC_1] = r;
    args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1] = b;
    scales.add_to(args);
  }
  const dnnl::matmul matmul(pd);
  for (int i = 0; i < 5; ++i) matmul.execute(stream, args);
  stream.wait();
  constexpr int kRuns = 30;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRuns; ++i) matmul.execute(stream, args);
  stream.wait();
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  return {elapsed.count() / kRuns, pd.impl_info_str()};
}

}  // namespace

int main(int argc, char** argv) {
  const long tokens = argc > 1 ? std::atol(argv[1]) : 1024;
  const long hidden = argc > 2 ? std::atol(argv[2]) : 768;
  if (tokens <= 0 || hidden <= 0 || tokens > 65536 || hidden > 8192) {
    fmt::print(stderr, "usage: {} [tokens 1..65536] [hidden 1..8192]\n", argv[0]);
    return 2;
  }
  // Below AVX-512 oneDNN has no bf16 kernel (its reference loop would take
  // minutes a shape) and int8 without VNNI is not what polyhal runs: the
  // table has nothing to say here.
  if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl")) {
    fmt::print(
        "skipped: this CPU has no AVX-512, where oneDNN computes neither bf16 nor the "
        "int8 polyhal runs (polyhal devices says which precisions are native)\n");
    return 0;
  }
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const Shape shapes[] = {{"qkv", 3 * hidden, hidden, false},
                          {"attention out", hidden, hidden, false},
                          {"ffn up", 4 * hidden, hidden, true},
                          {"ffn down", hidden, 4 * hidden, false}};
  fmt::print(
      "| GEMM [{} x K] x [K x N] | int8 raw TOPS | int8 + epilogue | bf16 raw TFLOP/s | "
      "bf16 + epilogue | int8 / bf16 raw | int8 / bf16 with epilogue |\n",
      tokens);
  fmt::print("|---|---|---|---|---|---|---|\n");
  double totals[4] = {0, 0, 0, 0};
  std::string kernels;
  for (const auto& shape : shapes) {
    const double ops = 2.0 * static_cast<double>(tokens * shape.n) * static_cast<double>(shape.k);
    double ms[4];
    int i = 0;
    for (const bool int8 : {true, false}) {
      for (const bool epilogue : {false, true}) {
        auto [t, implementation] =
            time_matmul(engine, tokens, shape.n, shape.k, int8, epilogue, shape.gelu);
        ms[i] = t;
        totals[i++] += t;
        if (kernels.find(implementation) == std::string::npos)
          kernels += (kernels.empty() ? "" : ", ") + implementation;
      }
    }
    const auto rate = [&](double t) { return ops / t / 1e9; };
    fmt::print("| {} (N {}, K {}){} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f}x | {:.2f}x |\n",
               shape.name, shape.n, shape.k, shape.gelu ? " + GELU" : "", rate(ms[0]), rate(ms[1]),
               rate(ms[2]), rate(ms[3]), ms[2] / ms[0], ms[3] / ms[1]);
  }
  fmt::print(
      "| all four (ms per layer) | {:.2f} ms | {:.2f} ms | {:.2f} ms | {:.2f} ms | {:.2f}x | "
      "{:.2f}x |\n",
      totals[0], totals[1], totals[2], totals[3], totals[2] / totals[0], totals[3] / totals[1]);
  fmt::print("\noneDNN kernels: {}\n", kernels);
  return 0;
}
