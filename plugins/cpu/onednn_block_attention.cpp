#include "onednn_block_attention.hpp"
#include "onednn_api.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "omp_convert.hpp"
#include "omp_dropout.hpp"
#include "onednn_gemm.hpp"
#include "onednn_packed_scores.hpp"
#include "polyhal/kernel.hpp"

namespace polyhal::cpu {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

namespace {

std::int64_t window_length(std::int64_t count, std::int64_t seq) {
  return std::min(seq, (count + kBlockGranule - 1) / kBlockGranule * kBlockGranule);
}

std::size_t n(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

/// dP -> dS on one row of `k` scores `g`, whose probabilities start at
/// element `full` of `probs`: dS = P (dP - sum_j P dP) * scale, dP masked
/// first when the probabilities were dropped.
void softmax_backward_row(float* g, const char* probs, std::size_t full, std::int64_t k, bool bf16,
                          float scale, const DropoutMask* dropout, bool avx512) {
  if (dropout != nullptr) apply_dropout(*dropout, full, g, g, k, avx512);
  const auto p = [&](std::int64_t j) {
    return bf16 ? load_f32(reinterpret_cast<const std::uint16_t*>(probs) + full, j)
                : load_f32(reinterpret_cast<const float*>(probs) + full, j);
  };
  double weighted = 0;
  for (std::int64_t j = 0; j < k; ++j) weighted += static_cast<double>(p(j)) * g[j];
  for (std::int64_t j = 0; j < k; ++j) g[j] = static_cast<float>(p(j) * (g[j] - weighted)) * scale;
}

}  // namespace

std::optional<std::vector<AttentionBlock>> attention_blocks(const std::int32_t* mask,
                                                            std::int64_t rows, std::int64_t seq) {
  std::vector<AttentionBlock> blocks;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t* m = mask + r * seq;
    std::set<std::int32_t> seen;
    bool real = false;
    for (std::int64_t t = 0; t < seq;) {
      std::int64_t end = t;
      while (end < seq && m[end] == m[t]) ++end;
      AttentionBlock b;
      b.row = r;
      b.first = t;
      b.count = end - t;
      b.sequence = m[t];
      b.q_len = window_length(b.count, seq);
      b.q_start = std::min(b.first, seq - b.q_len);
      if (b.sequence != 0) {
        if (!seen.insert(b.sequence).second) return std::nullopt;  // split sequence
        real = true;
        b.k_start = b.q_start;
        b.k_len = b.q_len;
      } else {  // padding attends every real token of the row
        b.k_start = 0;
        b.k_len = seq;
      }
      blocks.push_back(b);
      t = end;
    }
    if (!real) return std::nullopt;
  }
  return blocks;
}

/// The primitives of one (query window, key window) size.
struct BlockAttention::Window {
  std::optional<Gemm> scores, context, dv, dp, dq, dk;
  std::optional<onednn::softmax_forward> softmax;
  dnnl::memory scores_mem, additive;
};

BlockAttention::BlockAttention(AttentionDims shape, const dnnl::engine& engine, bool avx512)
    : dims_(shape), engine_(engine), stream_(engine), avx512_(avx512) {}

BlockAttention::~BlockAttention() = default;

void BlockAttention::allocate() {
  if (!scores_.empty()) return;
  const std::size_t square = n(dims_.heads * dims_.s * dims_.s), row = n(dims_.s * dims_.h);
  scores_.assign(square, 0.0f);
  operand_.assign(square * dtype_size(dims_.type), std::byte{0});
  rows_.assign(row * dtype_size(dims_.type), std::byte{0});
  dq_.assign(row, 0.0f);
  dk_.assign(row, 0.0f);
  dv_.assign(row, 0.0f);
  accumulated_.assign(3 * row, 0.0f);
  additive_.assign(n(dims_.s), 0.0f);
}

std::uint64_t BlockAttention::workspace_bytes() const {
  const std::uint64_t square = n(dims_.heads * dims_.s * dims_.s), row = n(dims_.s * dims_.h);
  const std::uint64_t element = dtype_size(dims_.type);
  return square * (4 + element) + row * (element + 4 * 6) + 4 * n(dims_.s);
}

BlockAttention::Window* BlockAttention::window(std::int64_t q_len, std::int64_t k_len,
                                               bool backward) {
  auto& slot = windows_[{q_len, k_len}];
  if (!slot) slot = std::make_unique<Window>();
  Window& w = *slot;
  const std::int64_t heads = dims_.heads, d = dims_.d, h3 = 3 * dims_.h, h = dims_.h;
  const dt op = operand_type(dims_.type);
  const std::int64_t m = q_len, k = k_len;
  // Q, K, V of a window: rows of QKV [B*S, 3H] as (head, token, c).
  const dnnl::memory::desc q_md({heads, m, d}, op, dims{d, h3, 1});
  const dnnl::memory::desc k_md({heads, k, d}, op, dims{d, h3, 1});
  const dnnl::memory::desc kt_md({heads, d, k}, op, dims{d, 1, h3});
  const dnnl::memory::desc scores_md({heads, m, k}, dt::f32, tag::abc);
  const dnnl::memory::desc p_md({heads, m, k}, op, tag::abc);
  const dnnl::memory::desc pt_md({heads, k, m}, op, dims{m * k, 1, k});
  const dnnl::memory::desc rows_md({heads, m, d}, op, dims{d, h, 1});  // [m, H] rows
  const dnnl::memory::desc mask_md({1, 1, k}, dt::f32, tag::abc);
  try {
    if (!backward && !w.scores) {
      w.scores.emplace(engine_, q_md, kt_md, scores_md, false, false,
                       scores_attr(1.0f / std::sqrt(static_cast<float>(d)), mask_md, false));
      w.context.emplace(engine_, p_md, k_md, rows_md, false);
      w.softmax.emplace(onednn::softmax(engine_, scores_md, scores_md, 2));
      w.scores_mem = dnnl::memory(scores_md, engine_, scores_.data());
      w.additive = dnnl::memory(mask_md, engine_, additive_.data());
    }
    if (backward && !w.dv) {
      const dnnl::memory::desc key_grad_md({heads, k, d}, dt::f32, tag::abc);
      const dnnl::memory::desc query_grad_md({heads, m, d}, dt::f32, tag::abc);
      w.dv.emplace(engine_, pt_md, rows_md, key_grad_md, false);  // dV = P^T dctx
      w.dp.emplace(engine_, rows_md, kt_md, scores_md, false);    // dP = dctx V^T
      w.dq.emplace(engine_, p_md, k_md, query_grad_md, false);    // dQ = dS K
      w.dk.emplace(engine_, pt_md, q_md, key_grad_md, false);     // dK = dS^T Q
    }
  } catch (const dnnl::error&) {
    return nullptr;  // no primitive for this size: the full masked path
  }
  return &w;
}

bool BlockAttention::forward(const void* qkv, const std::int32_t* mask, void* ctx, void* probs,
                             const DropoutMask* dropout) {
  if (dims_.type != DType::f32 && dims_.type != DType::bf16) return false;
  const auto blocks = attention_blocks(mask, dims_.b, dims_.s);
  if (!blocks) return false;
  allocate();
  for (const auto& b : *blocks)
    if (!window(b.q_len, b.k_len, false)) return false;
  const bool bf16 = dims_.type == DType::bf16;
  const std::size_t element = dtype_size(dims_.type);
  const std::int64_t s = dims_.s, h = dims_.h, h3 = 3 * h, heads = dims_.heads;
  const auto* base = static_cast<const char*>(qkv);
  for (const auto& b : *blocks) {
    Window& w = *windows_.at({b.q_len, b.k_len});
    const std::int64_t m = b.q_len, k = b.k_len;
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int32_t key = mask[b.row * s + b.k_start + j];
      // The block's queries all carry `sequence`: the rule for any of them.
      additive_[n(j)] = attention_allows(b.sequence, key) ? 0.0f : kMasked;
    }
    const char* q = base + n((b.row * s + b.q_start) * h3) * element;
    const char* keys = base + n((b.row * s + b.k_start) * h3) * element;
    w.scores->run(stream_, q, keys + n(h) * element, scores_.data(),
                  {{kScoresMaskArg, w.additive}});
    w.softmax->execute(stream_, {{DNNL_ARG_SRC, w.scores_mem}, {DNNL_ARG_DST, w.scores_mem}});
    stream_.wait();
    // The probabilities at the operand type, as the full path stores them,
    // then the dropout mask on the block's rows (indexed as in [B,heads,S,S]).
    const std::int64_t count = heads * m * k;
    if (bf16) to_bf16(scores_.data(), reinterpret_cast<std::uint16_t*>(operand_.data()), count);
    const void* p = bf16 ? static_cast<const void*>(operand_.data()) : scores_.data();
    if (probs != nullptr) {
#pragma omp parallel for collapse(2) schedule(static)
      for (std::int64_t head = 0; head < heads; ++head) {
        for (std::int64_t i = b.first - b.q_start; i < b.first - b.q_start + b.count; ++i) {
          const std::size_t full = n(((b.row * heads + head) * s + b.q_start + i) * s);
          const std::size_t block = n((head * m + i) * k);
          char* dst = static_cast<char*>(probs) + full * element;
          std::memset(dst, 0, n(s) * element);
          std::memcpy(dst + n(b.k_start) * element, static_cast<const char*>(p) + block * element,
                      n(k) * element);
        }
      }
    }
    if (dropout != nullptr) {
#pragma omp parallel for collapse(2) schedule(static)
      for (std::int64_t head = 0; head < heads; ++head) {
        for (std::int64_t i = b.first - b.q_start; i < b.first - b.q_start + b.count; ++i) {
          const auto full = static_cast<std::uint64_t>(
              ((b.row * heads + head) * s + b.q_start + i) * s + b.k_start);
          const std::size_t block = n((head * m + i) * k);
          if (bf16) {
            auto* bits = reinterpret_cast<std::uint16_t*>(operand_.data()) + block;
            apply_dropout_bf16(*dropout, full, bits, bits, k, avx512_);
          } else {
            apply_dropout(*dropout, full, scores_.data() + block, scores_.data() + block, k,
                          avx512_);
          }
        }
      }
    }
    w.context->run(stream_, p, keys + n(2 * h) * element, rows_.data());
    stream_.wait();
    const std::size_t first_row = n(b.first - b.q_start);
    std::memcpy(static_cast<char*>(ctx) + n((b.row * s + b.first) * h) * element,
                rows_.data() + first_row * n(h) * element, n(b.count * h) * element);
  }
  return true;
}

bool BlockAttention::backward(const void* dctx, const void* qkv, const void* probs,
                              const std::int32_t* mask, void* dqkv, const DropoutMask* dropout) {
  if (dims_.type != DType::f32 && dims_.type != DType::bf16) return false;
  const auto blocks = attention_blocks(mask, dims_.b, dims_.s);
  if (!blocks) return false;
  allocate();
  for (const auto& b : *blocks)
    if (!window(b.q_len, b.k_len, true)) return false;
  const bool bf16 = dims_.type == DType::bf16;
  const std::size_t element = dtype_size(dims_.type);
  const std::int64_t s = dims_.s, h = dims_.h, h3 = 3 * h, heads = dims_.heads, d = dims_.d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const auto* base = static_cast<const char*>(qkv);
  const auto* probs_bytes = static_cast<const char*>(probs);
  for (std::size_t at = 0; at < blocks->size();) {
    const std::int64_t row = (*blocks)[at].row;
    std::fill(accumulated_.begin(), accumulated_.end(), 0.0f);
    for (; at < blocks->size() && (*blocks)[at].row == row; ++at) {
      const AttentionBlock& b = (*blocks)[at];
      Window& w = *windows_.at({b.q_len, b.k_len});
      const std::int64_t m = b.q_len, k = b.k_len, skip = b.first - b.q_start;
      // dctx of the block's queries; the window's other rows are zero, so
      // they add nothing to any product below.
      std::memset(rows_.data(), 0, n(m * h) * element);
      std::memcpy(rows_.data() + n(skip * h) * element,
                  static_cast<const char*>(dctx) + n((row * s + b.first) * h) * element,
                  n(b.count * h) * element);
      // The kept probabilities P (x dropout mask) of the block's queries.
      std::memset(operand_.data(), 0, n(heads * m * k) * element);
#pragma omp parallel for collapse(2) schedule(static)
      for (std::int64_t head = 0; head < heads; ++head) {
        for (std::int64_t i = skip; i < skip + b.count; ++i) {
          const std::size_t full = n(((row * heads + head) * s + b.q_start + i) * s + b.k_start);
          const std::size_t block = n((head * m + i) * k);
          std::memcpy(operand_.data() + block * element, probs_bytes + full * element,
                      n(k) * element);
          if (dropout == nullptr) continue;
          if (bf16) {
            auto* bits = reinterpret_cast<std::uint16_t*>(operand_.data()) + block;
            apply_dropout_bf16(*dropout, full, bits, bits, k, avx512_);
          } else {
            auto* values = reinterpret_cast<float*>(operand_.data()) + block;
            apply_dropout(*dropout, full, values, values, k, avx512_);
          }
        }
      }
      const char* keys = base + n((row * s + b.k_start) * h3) * element;
      const char* queries = base + n((row * s + b.q_start) * h3) * element;
      w.dv->run(stream_, operand_.data(), rows_.data(), dv_.data());
      w.dp->run(stream_, rows_.data(), keys + n(2 * h) * element, scores_.data());
      stream_.wait();
      // dP -> dS on the block's rows: dS = P (dP - sum_j P dP) / sqrt(d),
      // dP masked first when the probabilities were dropped.
#pragma omp parallel for collapse(2) schedule(static)
      for (std::int64_t head = 0; head < heads; ++head) {
        for (std::int64_t i = 0; i < m; ++i) {
          float* g = scores_.data() + (head * m + i) * k;
          if (i < skip || i >= skip + b.count) {
            std::fill(g, g + k, 0.0f);
            continue;
          }
          const std::size_t full = n(((row * heads + head) * s + b.q_start + i) * s + b.k_start);
          softmax_backward_row(g, probs_bytes, full, k, bf16, scale, dropout, avx512_);
        }
      }
      if (bf16)
        to_bf16(scores_.data(), reinterpret_cast<std::uint16_t*>(operand_.data()), heads * m * k);
      const void* ds = bf16 ? static_cast<const void*>(operand_.data()) : scores_.data();
      w.dq->run(stream_, ds, keys + n(h) * element, dq_.data());
      w.dk->run(stream_, ds, queries, dk_.data());
      stream_.wait();
      // Sums into the row's f32 dQKV: a key may take part in two blocks
      // (its sequence's and the padding's).
#pragma omp parallel for schedule(static)
      for (std::int64_t head = 0; head < heads; ++head) {
        for (std::int64_t i = 0; i < m; ++i) {
          float* dst = accumulated_.data() + (b.q_start + i) * h3 + head * d;
          const float* src = dq_.data() + (head * m + i) * d;
          for (std::int64_t c = 0; c < d; ++c) dst[c] += src[c];
        }
        for (std::int64_t j = 0; j < k; ++j) {
          float* dst = accumulated_.data() + (b.k_start + j) * h3 + head * d;
          const float *dkey = dk_.data() + (head * k + j) * d,
                      *dvalue = dv_.data() + (head * k + j) * d;
          for (std::int64_t c = 0; c < d; ++c) {
            dst[h + c] += dkey[c];
            dst[2 * h + c] += dvalue[c];
          }
        }
      }
    }
    char* out = static_cast<char*>(dqkv) + n(row * s * h3) * element;
    if (bf16) {
      to_bf16(accumulated_.data(), reinterpret_cast<std::uint16_t*>(out), s * h3);
    } else {
      std::memcpy(out, accumulated_.data(), n(s * h3) * sizeof(float));
    }
  }
  return true;
}

}  // namespace polyhal::cpu
