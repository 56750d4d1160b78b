// BERT self-attention two ways on oneDNN 3 (Debian 13), same CPU, inputs and
// threads, alternating: the three primitives the CPU plugin runs
// (plugins/cpu/onednn_attention.cpp: scores matmul with scale and mask
// post-ops, softmax, context matmul; Q, K and V read in place from the fused
// QKV tensor) against the Graph API's fused scaled dot-product attention
// partition (MatMul, Multiply, Add, SoftMax, MatMul) on the same strided views.
// Prints one Markdown table row; bench/onednn_graph_sdpa.sh builds and runs it
// over a grid of shapes. Needs oneDNN >= 3.5 (the Graph API's sdp pattern).
//   onednn_graph_sdpa BATCH SEQ f32|bf16
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_graph.hpp>

namespace {

using dims = dnnl::memory::dims;
using lt = dnnl::graph::logical_tensor;

std::uint16_t to_bf16(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<std::uint16_t>(bits >> 16);
}

float element(const std::vector<char>& buffer, std::int64_t i, bool bf16) {
  float v = 0;
  if (bf16) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &buffer[i * 2], 2);
    bits <<= 16;
    std::memcpy(&v, &bits, 4);
  } else {
    std::memcpy(&v, &buffer[i * 4], 4);
  }
  return v;
}

// Writes v as the benchmark's element type at element i.
void store(std::vector<char>& buffer, std::int64_t i, float v, bool bf16) {
  if (bf16) {
    const std::uint16_t half = to_bf16(v);
    std::memcpy(&buffer[i * 2], &half, 2);
  } else {
    std::memcpy(&buffer[i * 4], &v, 4);
  }
}

template <typename F>
double best_ms(F&& run, int iterations) {
  double best = 1e30;
  for (int repeat = 0; repeat < 3; ++repeat) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) run();
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / iterations);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BATCH SEQ f32|bf16\n", argv[0]);
    return 2;
  }
  const std::int64_t b = std::atoll(argv[1]), s = std::atoll(argv[2]), heads = 12, d = 64;
  const std::int64_t h = heads * d;
  const bool bf16 = std::string(argv[3]) == "bf16";
  const std::int64_t el = bf16 ? 2 : 4;
  const auto type = bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
  const auto graph_type = bf16 ? lt::data_type::bf16 : lt::data_type::f32;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);

  std::vector<char> qkv(b * s * 3 * h * el), ctx_primitives(b * s * h * el),
      ctx_graph(b * s * h * el);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (std::int64_t i = 0; i < b * s * 3 * h; ++i) store(qkv, i, uniform(rng), bf16);
  // Padded batch: sequence i has its last 4*i positions masked.
  std::vector<float> mask(b * s, 0.0f);
  std::vector<char> mask_graph(b * s * el);
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = std::max<std::int64_t>(0, s - 4 * i); j < s; ++j)
      mask[i * s + j] = -3.4e38f;
  for (std::int64_t i = 0; i < b * s; ++i) store(mask_graph, i, mask[i], bf16);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<char> scale_graph(el);
  store(scale_graph, 0, scale, bf16);

  // The plugin's three primitives on views into QKV [B*S, 3H].
  const dims view_strides{s * 3 * h, d, 3 * h, 1};
  const dnnl::memory::desc q_md({b, heads, s, d}, type, view_strides);
  const dnnl::memory::desc kt_md({b, heads, d, s}, type, dims{s * 3 * h, d, 1, 3 * h});
  const dnnl::memory::desc scores_md({b, heads, s, s}, dnnl::memory::data_type::f32,
                                     dnnl::memory::format_tag::abcd);
  const dnnl::memory::desc probs_md({b, heads, s, s}, type, dnnl::memory::format_tag::abcd);
  const dnnl::memory::desc mask_md({b, 1, 1, s}, dnnl::memory::data_type::f32,
                                   dnnl::memory::format_tag::abcd);
  const dnnl::memory::desc ctx_md({b, heads, s, d}, type, dims{s * h, d, h, 1});
  dnnl::post_ops scores_ops;
  scores_ops.append_eltwise(dnnl::algorithm::eltwise_linear, scale, 0.0f);
  scores_ops.append_binary(dnnl::algorithm::binary_add, mask_md);
  dnnl::primitive_attr scores_attr;
  scores_attr.set_post_ops(scores_ops);
  dnnl::matmul scores_prim({engine, q_md, kt_md, scores_md, scores_attr});
  dnnl::softmax_forward softmax_prim({engine, dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::softmax_accurate, scores_md, probs_md, 3});
  dnnl::matmul context_prim({engine, probs_md, q_md, ctx_md});
  dnnl::memory q(q_md, engine, qkv.data()), kt(kt_md, engine, qkv.data() + h * el),
      v(q_md, engine, qkv.data() + 2 * h * el), scores(scores_md, engine), probs(probs_md, engine),
      mask_mem(mask_md, engine, mask.data()), ctx(ctx_md, engine, ctx_primitives.data());
  auto primitives = [&] {
    scores_prim.execute(stream, {{DNNL_ARG_SRC, q},
                                 {DNNL_ARG_WEIGHTS, kt},
                                 {DNNL_ARG_DST, scores},
                                 {DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, mask_mem}});
    softmax_prim.execute(stream, {{DNNL_ARG_SRC, scores}, {DNNL_ARG_DST, probs}});
    context_prim.execute(stream,
                         {{DNNL_ARG_SRC, probs}, {DNNL_ARG_WEIGHTS, v}, {DNNL_ARG_DST, ctx}});
    stream.wait();
  };

  // The Graph API's sdp pattern on the same views. (lt::dims{1}, not {1}:
  // a braced 1 picks the constructor that takes a rank.)
  enum : std::size_t { kQ, kK, kScores, kScale, kScaled, kMask, kMasked, kProbs, kV, kOut };
  const lt q_lt(kQ, graph_type, {b, heads, s, d}, view_strides);
  const lt k_lt(kK, graph_type, {b, heads, s, d}, view_strides);
  const lt v_lt(kV, graph_type, {b, heads, s, d}, view_strides);
  const lt scale_lt(kScale, graph_type, lt::dims{1}, lt::layout_type::strided);
  const lt mask_lt(kMask, graph_type, {b, 1, 1, s}, lt::layout_type::strided);
  const lt out_lt(kOut, graph_type, {b, heads, s, d}, lt::dims{s * h, d, h, 1});
  auto square = [&](std::size_t id) {
    return lt(id, graph_type, {b, heads, s, s}, lt::layout_type::strided);
  };
  using op = dnnl::graph::op;
  op qk(0, op::kind::MatMul, {q_lt, k_lt}, {square(kScores)}, "qk");
  qk.set_attr<bool>(op::attr::transpose_b, true);
  op scaled(1, op::kind::Multiply, {square(kScores), scale_lt}, {square(kScaled)}, "scale");
  op masked(2, op::kind::Add, {square(kScaled), mask_lt}, {square(kMasked)}, "mask");
  op softmax(3, op::kind::SoftMax, {square(kMasked)}, {square(kProbs)}, "softmax");
  softmax.set_attr<std::int64_t>(op::attr::axis, -1);
  op pv(4, op::kind::MatMul, {square(kProbs), v_lt}, {out_lt}, "pv");
  dnnl::graph::graph graph(dnnl::engine::kind::cpu);
  for (auto* each : {&qk, &scaled, &masked, &softmax, &pv}) graph.add_op(*each);
  graph.finalize();
  const auto partitions = graph.get_partitions();
  if (partitions.size() != 1) {
    std::fprintf(stderr, "the Graph API split attention into %zu partitions\n", partitions.size());
    return 1;
  }
  const auto compiled =
      partitions[0].compile({q_lt, k_lt, scale_lt, mask_lt, v_lt}, {out_lt}, engine);
  std::vector<dnnl::graph::tensor> inputs;
  for (const auto& port : partitions[0].get_input_ports()) {
    void* data = nullptr;
    switch (port.get_id()) {
      case kQ:
        data = qkv.data();
        break;
      case kK:
        data = qkv.data() + h * el;
        break;
      case kV:
        data = qkv.data() + 2 * h * el;
        break;
      case kScale:
        data = scale_graph.data();
        break;
      case kMask:
        data = mask_graph.data();
        break;
      default:
        std::fprintf(stderr, "unexpected input port %zu\n", port.get_id());
        return 1;
    }
    inputs.emplace_back(compiled.query_logical_tensor(port.get_id()), engine, data);
  }
  std::vector<dnnl::graph::tensor> outputs{dnnl::graph::tensor(out_lt, engine, ctx_graph.data())};
  auto fused = [&] {
    compiled.execute(stream, inputs, outputs);
    stream.wait();
  };

  primitives();
  fused();
  double max_difference = 0;
  for (std::int64_t i = 0; i < b * s * h; ++i)
    max_difference = std::max<double>(
        max_difference, std::fabs(element(ctx_primitives, i, bf16) - element(ctx_graph, i, bf16)));
  const int iterations = std::max<int>(5, static_cast<int>(20000 / (b * s)));
  double primitives_ms = 1e30, fused_ms = 1e30;
  for (int round = 0; round < 2; ++round) {  // alternate, best of all
    primitives_ms = std::min(primitives_ms, best_ms(primitives, iterations));
    fused_ms = std::min(fused_ms, best_ms(fused, iterations));
  }
  std::printf("| %ld | %ld | %s | %.3f | %.3f | %.2f | %.1e |\n", static_cast<long>(b),
              static_cast<long>(s), bf16 ? "bf16" : "f32", primitives_ms, fused_ms,
              primitives_ms / fused_ms, max_difference);
  return 0;
}
