// oneDNN's f32 GEMM on BERT's four encoder GEMMs at several row counts,
// with the weights as oneDNN asks for them and with the padded rows the CPU
// linear uses where a weight row is a multiple of 2 KiB
// (plugins/cpu/onednn_linear.cpp): the f32 ceiling of this CPU and what
// the padding gains. oneDNN directly, no polyhal kernel. Prints a Markdown
// table of GFLOP/s.
//
//   build/bench/polyhal_f32_weight_rows_bench [hidden=768] [threads from OMP_NUM_THREADS]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "onednn_api.hpp"

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

/// GFLOP/s of [m, k] x [k, n] (+ GELU), weights as oneDNN asks or rows padded by 64 bytes.
double gflops(const dnnl::engine& engine, long m, long k, long n, bool gelu, bool padded) {
  dnnl::stream stream(engine);
  const dnnl::memory::desc src({m, k}, dt::f32, tag::ab), dst({m, n}, dt::f32, tag::ab);
  const dnnl::memory::desc weights =
      padded ? dnnl::memory::desc({k, n}, dt::f32, dnnl::memory::dims{n + 16, 1})
             : dnnl::memory::desc({k, n}, dt::f32, tag::any);
  dnnl::primitive_attr attr;
  dnnl::post_ops post_ops;
  if (gelu) polyhal::cpu::onednn::append_eltwise(post_ops, dnnl::algorithm::eltwise_gelu_erf);
  attr.set_post_ops(post_ops);
  const auto pd = polyhal::cpu::onednn::matmul(engine, src, weights, dst, attr);
  dnnl::memory s(src, engine), w(pd.weights_desc(), engine), d(dst, engine);
  std::fill_n(static_cast<float*>(s.get_data_handle()), m * k, 0.01f);
  std::fill_n(static_cast<float*>(w.get_data_handle()), pd.weights_desc().get_size() / 4, 0.01f);
  const std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, d}};
  const dnnl::matmul matmul(pd);
  for (int i = 0; i < 3; ++i) matmul.execute(stream, args);
  stream.wait();
  int runs = 0;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::duration<double> elapsed{};
  while (elapsed.count() < 0.3) {
    matmul.execute(stream, args);
    stream.wait();
    ++runs;
    elapsed = std::chrono::steady_clock::now() - start;
  }
  return 2.0 * static_cast<double>(m * k) * static_cast<double>(n) * runs / elapsed.count() / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const long hidden = argc > 1 ? std::atol(argv[1]) : 768;
  if (hidden <= 0 || hidden > 8192) {
    fmt::print(stderr, "usage: {} [hidden 1..8192]\n", argv[0]);
    return 2;
  }
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  struct Shape {
    const char* name;
    long n, k;
    bool gelu;
  };
  const Shape shapes[] = {{"qkv", 3 * hidden, hidden, false},
                          {"attention out", hidden, hidden, false},
                          {"ffn up + GELU", 4 * hidden, hidden, true},
                          {"ffn down", hidden, 4 * hidden, false}};
  const long rows[] = {32, 64, 128, 256, 512, 1024};
  fmt::print("| GEMM (f32, GFLOP/s) | weights |");
  for (const long m : rows) fmt::print(" {} rows |", m);
  fmt::print("\n|---|---|");
  for (std::size_t i = 0; i < std::size(rows); ++i) fmt::print("---|");
  fmt::print("\n");
  for (const auto& shape : shapes) {
    for (const bool padded : {false, true}) {
      // Only rows of a multiple of 2 KiB are padded by the CPU linear.
      if (padded && shape.n * 4 % 2048 != 0) continue;
      fmt::print("| {} (N {}, K {}) | {} |", shape.name, shape.n, shape.k,
                 padded ? "rows + 64 bytes" : "as oneDNN asks");
      for (const long m : rows)
        fmt::print(" {:.1f} |", gflops(engine, m, shape.k, shape.n, shape.gelu, padded));
      fmt::print("\n");
    }
  }
  return 0;
}
