// Reference kernels for training (f32): forward ops that keep what backward
// needs, their backward ops, the pre-training loss and the optimizer updates.
// Contracts are listed in polyhal/train_kernels.hpp. Weights are run inputs
// here, not constants: they change every step.
#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "kernels/function_kernel.hpp"
#include "kernels/reference_gemm.hpp"
#include "kernels/reference_groupbert_kernels.hpp"
#include "kernels/reference_modernbert_kernels.hpp"
#include "polyhal/dropout_mask.hpp"
#include "polyhal/error.hpp"
#include "polyhal/parallel.hpp"
#include "polyhal/reference_kernels.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal {
namespace {

using detail::f;
using detail::FunctionKernel;
using detail::ints;
using detail::n;
using detail::rows;

/// Elements per chunk of a deterministic_sum: large enough that a chunk's
/// work dwarfs scheduling, small enough to balance two to a hundred threads.
constexpr std::int64_t kSumGrain = 1 << 15;

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

/// sum + term, rounded to f16 with f16 partials (the IPU's half accumulation).
inline float accumulate(bool f16_partials, float sum, float term) {
  const float s = sum + term;
  return f16_partials ? round_through(DType::f16, s) : s;
}

/// The operands of a GEMM as it multiplies them: rounded to `type` in
/// `scratch` when the desc asks for narrower products (bf32), else as stored.
const float* product_operand(DType type, const float* values, std::size_t count,
                             std::vector<float>& scratch) {
  if (type == DType::f32) return values;
  scratch.resize(count);
  for (std::size_t i = 0; i < count; ++i) scratch[i] = round_through(type, values[i]);
  return scratch.data();
}

/// What the weights are rounded to: the products' type (bf32), or storage's.
DType weight_type(const KernelDesc& d) {
  return d.products != DType::f32 ? d.products : round_type(d);
}

std::unique_ptr<Kernel> dense(const KernelDesc& d, const ParallelFor& par, bool f16_partials) {
  const std::int64_t m = d.input_shapes.at(0).at(0), k = d.input_shapes.at(0).at(1),
                     out = d.input_shapes.at(1).at(0);
  auto wt = std::make_shared<std::vector<float>>(n(k * out));
  auto xs = std::make_shared<std::vector<float>>();
  const DType type = weight_type(d), products = d.products;
  return std::make_unique<FunctionKernel>(
      "dense", 2.0 * static_cast<double>(m * out * k), [=](auto in, auto o) {
        // Y = X W^T + b, with W transposed into [K, N] scratch for the row GEMM.
        const float* w = f(in[1]);
        rows(par, k, [&](std::size_t c) {
          for (std::size_t r = 0; r < n(out); ++r)
            (*wt)[c * n(out) + r] = round_through(type, w[r * n(k) + c]);
        });
        const float* x = product_operand(products, f(in[0]), n(m * k), *xs);
        detail::reference_gemm(x, wt->data(), f(o[0]), n(m), n(out), n(k), f16_partials);
        const float* b = f(in[2]);
        float* y = f(o[0]);
        rows(par, m, [&](std::size_t i) {
          for (std::size_t j = 0; j < n(out); ++j) y[i * n(out) + j] += b[j];
        });
      });
}

std::unique_ptr<Kernel> dense_backward(const KernelDesc& d, const ParallelFor& par,
                                       bool f16_partials) {
  const std::int64_t m = d.input_shapes.at(0).at(0), out = d.input_shapes.at(0).at(1),
                     k = d.input_shapes.at(1).at(1);
  auto scratch = std::make_shared<std::vector<float>>(n(m * out + out * k));  // dY^T, dW step
  auto rounded_w = std::make_shared<std::vector<float>>();
  auto rounded_dy = std::make_shared<std::vector<float>>();
  auto rounded_x = std::make_shared<std::vector<float>>();
  const DType type = weight_type(d), products = d.products;
  return std::make_unique<FunctionKernel>(
      "dense_backward", 4.0 * static_cast<double>(m * out * k), [=](auto in, auto o) {
        const float* dy_stored = f(in[0]);
        const float* dy = product_operand(products, dy_stored, n(m * out), *rounded_dy);
        const float* x = product_operand(products, f(in[1]), n(m * k), *rounded_x);
        const float* w = f(in[2]);
        if (type != DType::f32) {  // backward sees the weights forward saw
          rounded_w->resize(n(out * k));
          for (std::size_t i = 0; i < rounded_w->size(); ++i)
            (*rounded_w)[i] = round_through(type, w[i]);
          w = rounded_w->data();
        }
        float *dx = f(o[0]), *dw = f(o[1]), *db = f(o[2]);
        // dX = dY W           [M,N] x [N,K]
        detail::reference_gemm(dy, w, dx, n(m), n(k), n(out), f16_partials);
        // dW += dY^T X         [N,M] x [M,K]; db += sum over rows of dY
        float* dy_t = scratch->data();
        rows(par, out, [&](std::size_t j) {
          for (std::size_t i = 0; i < n(m); ++i) dy_t[j * n(m) + i] = dy[i * n(out) + j];
        });
        float* dw_step = scratch->data() + m * out;
        detail::reference_gemm(dy_t, x, dw_step, n(out), n(k), n(m), f16_partials);
        rows(par, out, [&](std::size_t j) {
          for (std::size_t c = 0; c < n(k); ++c) dw[j * n(k) + c] += dw_step[j * n(k) + c];
          double sum = 0;  // of dY as stored: the bias gradient takes no product
          for (std::size_t i = 0; i < n(m); ++i) sum += dy_stored[i * n(out) + j];
          db[j] += static_cast<float>(sum);
        });
      });
}

/// y = op(a, b) element by element over [0, count), on the pool.
template <class Op>
void map2(const ParallelFor& par, std::int64_t count, const float* a, const float* b, float* y,
          Op op) {
  par(count, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) y[i] = op(a[i], b ? b[i] : 0.0f);
  });
}

std::unique_ptr<Kernel> elementwise(const KernelDesc& d, const ParallelFor& par) {
  const std::int64_t count = element_count(d.input_shapes.at(0));
  const OpKind op = d.op;
  return std::make_unique<FunctionKernel>(std::string(op_name(op)), 0.0, [=](auto in, auto o) {
    const float* a = f(in[0]);
    const float* b = in.size() > 1 ? f(in[1]) : nullptr;
    float* y = f(o[0]);
    if (op == OpKind::gelu) {
      map2(par, count, a, b, y,
           [](float x, float) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); });
    } else if (op == OpKind::gelu_backward) {  // in: dY, X
      map2(par, count, a, b, y, [](float dy, float x) {
        const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
        return dy * (cdf + x * kInvSqrt2Pi * std::exp(-0.5f * x * x));
      });
    } else if (op == OpKind::tanh) {
      map2(par, count, a, b, y, [](float x, float) { return std::tanh(x); });
    } else if (op == OpKind::tanh_backward) {  // in: dY, Y
      map2(par, count, a, b, y, [](float dy, float yv) { return dy * (1.0f - yv * yv); });
    } else if (op == OpKind::relu) {
      map2(par, count, a, b, y, [](float x, float) { return x > 0.0f ? x : 0.0f; });
    } else if (op == OpKind::relu_backward) {  // in: dY, Y
      map2(par, count, a, b, y, [](float dy, float yv) { return yv > 0.0f ? dy : 0.0f; });
    } else if (op == OpKind::add) {
      map2(par, count, a, b, y, [](float x, float z) { return x + z; });
    }
  });
}

std::unique_ptr<Kernel> layernorm_train(const KernelDesc& d, const ParallelFor& par) {
  const std::int64_t m = d.input_shapes.at(0).at(0), h = d.input_shapes.at(0).at(1);
  const double eps = d.attrs_as<LayerNormAttrs>().eps;
  return std::make_unique<FunctionKernel>("layernorm_train", 0.0, [=](auto in, auto o) {
    const float *x = f(in[0]), *gamma = f(in[1]), *beta = f(in[2]);
    float *y = f(o[0]), *mean_out = f(o[1]), *rstd_out = f(o[2]);
    rows(par, m, [&](std::size_t i) {
      const float* row = x + i * n(h);
      double mean = 0, var = 0;
      for (std::size_t j = 0; j < n(h); ++j) mean += row[j];
      mean /= static_cast<double>(h);
      for (std::size_t j = 0; j < n(h); ++j) var += (row[j] - mean) * (row[j] - mean);
      var /= static_cast<double>(h);
      const double rstd = 1.0 / std::sqrt(var + eps);
      for (std::size_t j = 0; j < n(h); ++j) {
        y[i * n(h) + j] = static_cast<float>((row[j] - mean) * rstd) * gamma[j] + beta[j];
      }
      mean_out[i] = static_cast<float>(mean);
      rstd_out[i] = static_cast<float>(rstd);
    });
  });
}

std::unique_ptr<Kernel> layernorm_backward(const KernelDesc& d, const ParallelFor& par) {
  const std::int64_t m = d.input_shapes.at(0).at(0), h = d.input_shapes.at(0).at(1);
  return std::make_unique<FunctionKernel>("layernorm_backward", 0.0, [=](auto in, auto o) {
    const float *dy = f(in[0]), *x = f(in[1]), *gamma = f(in[2]), *mean = f(in[3]),
                *rstd = f(in[4]);
    float *dx = f(o[0]), *dgamma = f(o[1]), *dbeta = f(o[2]);
    // Parameter gradients: each column sums its rows in order (no races,
    // the same result for any split), then dX per row.
    par(h, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = first; j < last; ++j) {
          const float xhat = (x[i * h + j] - mean[i]) * rstd[i];
          dgamma[j] += dy[i * h + j] * xhat;
          dbeta[j] += dy[i * h + j];
        }
      }
    });
    rows(par, m, [&](std::size_t i) {
      double sum_g = 0, sum_gx = 0;
      for (std::size_t j = 0; j < n(h); ++j) {
        const double g = static_cast<double>(dy[i * n(h) + j]) * gamma[j];
        const double xhat = (x[i * n(h) + j] - mean[i]) * rstd[i];
        sum_g += g;
        sum_gx += g * xhat;
      }
      const double inv_h = 1.0 / static_cast<double>(h);
      for (std::size_t j = 0; j < n(h); ++j) {
        const double g = static_cast<double>(dy[i * n(h) + j]) * gamma[j];
        const double xhat = (x[i * n(h) + j] - mean[i]) * rstd[i];
        dx[i * n(h) + j] =
            static_cast<float>(rstd[i] * (g - inv_h * sum_g - xhat * inv_h * sum_gx));
      }
    });
  });
}

struct AttentionDims {
  std::int64_t b, s, heads, h, d;
  double dropout;  // attention-probability dropout (0: off)
  std::uint64_t stream;
  std::int64_t window;  // > 0: keys at most this many rows from the query
  /// Query i of row b may attend key j (the mask's rule and the window).
  bool allows(const std::int32_t* mask, std::size_t row, std::size_t i, std::size_t j) const {
    if (window > 0 && (i > j ? i - j : j - i) > n(window)) return false;
    return attention_allows(mask[row * n(s) + i], mask[row * n(s) + j]);
  }
  /// The probabilities' dropout mask when dropout is on; `rng` is the
  /// input after the op's usual ones.
  std::optional<DropoutMask> mask(const std::int32_t* rng) const {
    if (dropout <= 0.0) return std::nullopt;
    return DropoutMask(rng, stream, dropout);
  }
};
/// `qkv_input` is the index of the QKV tensor among the op's inputs.
AttentionDims attention_dims(const KernelDesc& desc, std::size_t qkv_input) {
  const auto& attrs = desc.attrs_as<AttentionAttrs>();
  AttentionDims a{attrs.batch, attrs.seq,     attrs.heads,  0,
                  0,           attrs.dropout, attrs.stream, attrs.window};
  a.h = desc.input_shapes.at(qkv_input).at(1) / 3;
  a.d = a.h / a.heads;
  return a;
}

/// The bucket of each (query, key) pair of relative attention, checked
/// against the bias table's rows before any is read.
const std::int32_t* checked_buckets(const Tensor& buckets, std::int64_t bucket_count,
                                    const char* op) {
  const std::int32_t* values = ints(buckets);
  for (std::int64_t k = 0; k < buckets.numel(); ++k)
    if (values[k] < 0 || values[k] >= bucket_count)
      throw RuntimeFailure(fmt::format("{}: bucket {} is outside the {} rows of the bias table", op,
                                       values[k], bucket_count));
  return values;
}

/// attention_train, and relative_attention_train (a bias per bucket added
/// to each scaled score).
std::unique_ptr<Kernel> attention_train(const KernelDesc& desc, const ParallelFor& par,
                                        bool f16_partials) {
  const auto a = attention_dims(desc, 0);
  const bool relative = desc.op == OpKind::relative_attention_train;
  return std::make_unique<FunctionKernel>(
      std::string(op_name(desc.op)), 4.0 * static_cast<double>(a.b * a.s * a.s * a.h),
      [=](auto in, auto o) {
        const float* qkv = f(in[0]);
        const std::int32_t* mask = ints(in[1]);
        const std::int32_t* buckets =
            relative ? checked_buckets(in[2], in[3].shape[0], "relative_attention_train") : nullptr;
        const float* bias = relative ? f(in[3]) : nullptr;
        float *ctx = f(o[0]), *probs = f(o[1]);
        const auto drop = a.mask(a.dropout > 0.0 ? ints(in[relative ? 4 : 2]) : nullptr);
        const float scale = 1.0f / std::sqrt(static_cast<float>(a.d));
        rows(par, a.b * a.heads, [&](std::size_t bh) {
          const std::size_t b = bh / n(a.heads), head = bh % n(a.heads);
          const float* base = qkv + b * n(a.s) * 3 * n(a.h);
          for (std::size_t i = 0; i < n(a.s); ++i) {
            float* p = probs + (bh * n(a.s) + i) * n(a.s);
            const float* q = base + i * 3 * n(a.h) + head * n(a.d);
            float max_score = -INFINITY;
            for (std::size_t j = 0; j < n(a.s); ++j) {
              if (!a.allows(mask, b, i, j)) {
                p[j] = -INFINITY;
                continue;
              }
              const float* k = base + j * 3 * n(a.h) + n(a.h) + head * n(a.d);
              float dot = 0;
              for (std::size_t c = 0; c < n(a.d); ++c)
                dot = accumulate(f16_partials, dot, q[c] * k[c]);
              p[j] = dot * scale;
              if (buckets)
                p[j] += bias[n(buckets[(b * n(a.s) + i) * n(a.s) + j]) * n(a.heads) + head];
              max_score = std::max(max_score, p[j]);
            }
            float total = 0;
            for (std::size_t j = 0; j < n(a.s); ++j) {
              p[j] = p[j] == -INFINITY ? 0.0f : std::exp(p[j] - max_score);
              total += p[j];
            }
            float* out = ctx + (b * n(a.s) + i) * n(a.h) + head * n(a.d);
            std::fill(out, out + a.d, 0.0f);
            const std::size_t row = (bh * n(a.s) + i) * n(a.s);
            for (std::size_t j = 0; j < n(a.s); ++j) {
              p[j] /= total;
              const float kept = drop ? p[j] * (*drop)(row + j) : p[j];
              const float* v = base + j * 3 * n(a.h) + 2 * n(a.h) + head * n(a.d);
              for (std::size_t c = 0; c < n(a.d); ++c)
                out[c] = accumulate(f16_partials, out[c], kept * v[c]);
            }
          }
        });
      });
}

/// attention_backward, and relative_attention_backward (also the bias
/// table's gradient: each pair's score gradient summed into its bucket).
std::unique_ptr<Kernel> attention_backward(const KernelDesc& desc, const ParallelFor& par,
                                           bool f16_partials) {
  const auto a = attention_dims(desc, 1);
  const bool relative = desc.op == OpKind::relative_attention_backward;
  // Relative: per (row, head) partial sums of the bias gradient, added in
  // row order afterwards (no races, the same sum for any split).
  auto bias_partials = std::make_shared<std::vector<float>>();
  return std::make_unique<FunctionKernel>(
      std::string(op_name(desc.op)), 8.0 * static_cast<double>(a.b * a.s * a.s * a.h),
      [=](auto in, auto o) {
        const float *dctx = f(in[0]), *qkv = f(in[1]), *probs = f(in[2]);
        float* dqkv = f(o[0]);
        const std::int64_t bucket_count = relative ? o[1].shape[0] : 0;
        const std::int32_t* buckets =
            relative ? checked_buckets(in[3], bucket_count, "relative_attention_backward")
                     : nullptr;
        if (relative) bias_partials->assign(n(a.b * a.heads * bucket_count), 0.0f);
        const auto drop = a.mask(a.dropout > 0.0 ? ints(in[relative ? 4 : 3]) : nullptr);
        std::fill(dqkv, dqkv + a.b * a.s * 3 * a.h, 0.0f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(a.d));
        rows(par, a.b * a.heads, [&](std::size_t bh) {
          const std::size_t b = bh / n(a.heads), head = bh % n(a.heads);
          const std::size_t row3 = 3 * n(a.h), off = head * n(a.d);
          const float* base = qkv + b * n(a.s) * row3;
          float* dbase = dqkv + b * n(a.s) * row3;
          std::vector<float> dp(n(a.s));
          for (std::size_t i = 0; i < n(a.s); ++i) {
            const float* p = probs + (bh * n(a.s) + i) * n(a.s);
            const float* dout = dctx + (b * n(a.s) + i) * n(a.h) + off;
            // dV_j += kept_ij dout_i ; dp_ij = m_ij (dout_i . v_j), kept = m p
            const std::size_t row = (bh * n(a.s) + i) * n(a.s);
            for (std::size_t j = 0; j < n(a.s); ++j) {
              const float m = drop ? (*drop)(row + j) : 1.0f;
              const float* v = base + j * row3 + 2 * n(a.h) + off;
              float* dv = dbase + j * row3 + 2 * n(a.h) + off;
              float dot = 0;
              for (std::size_t c = 0; c < n(a.d); ++c) {
                dv[c] = accumulate(f16_partials, dv[c], p[j] * m * dout[c]);
                dot = accumulate(f16_partials, dot, dout[c] * v[c]);
              }
              dp[j] = dot * m;
            }
            // softmax backward: ds_j = p_j (dp_j - sum_k p_k dp_k), then the 1/sqrt(d) scale
            float weighted = 0;
            for (std::size_t j = 0; j < n(a.s); ++j) weighted += p[j] * dp[j];
            const float* q = base + i * row3 + off;
            float* dq = dbase + i * row3 + off;
            float* dbias = relative ? bias_partials->data() + bh * n(bucket_count) : nullptr;
            for (std::size_t j = 0; j < n(a.s); ++j) {
              const float dscore = p[j] * (dp[j] - weighted);
              if (dbias) dbias[n(buckets[(b * n(a.s) + i) * n(a.s) + j])] += dscore;
              const float ds = dscore * scale;
              if (ds == 0.0f) continue;
              const float* k = base + j * row3 + n(a.h) + off;
              float* dk = dbase + j * row3 + n(a.h) + off;
              for (std::size_t c = 0; c < n(a.d); ++c) {
                dq[c] = accumulate(f16_partials, dq[c], ds * k[c]);
                dk[c] = accumulate(f16_partials, dk[c], ds * q[c]);
              }
            }
          }
        });
        if (!relative) return;
        float* dbias = f(o[1]);  // [buckets, heads]
        for (std::size_t bh = 0; bh < n(a.b * a.heads); ++bh)
          for (std::size_t k = 0; k < n(bucket_count); ++k)
            dbias[k * n(a.heads) + bh % n(a.heads)] += (*bias_partials)[bh * n(bucket_count) + k];
      });
}

std::unique_ptr<Kernel> embedding_train(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t tokens = desc.input_shapes.at(0).at(0),
                     seq = desc.attrs_as<EmbeddingAttrs>().seq;
  return std::make_unique<FunctionKernel>("embedding_train", 0.0, [=](auto in, auto o) {
    const std::int32_t *ids = ints(in[0]), *types = ints(in[1]);
    check_embedding_ids(ids, types, tokens, in.subspan(2, 3));
    // Packed rows give each token's position; else position = row % seq.
    const std::int32_t* positions = in.size() > 5 ? ints(in[5]) : nullptr;
    if (positions) check_position_ids(positions, tokens, in[3].shape[0]);
    const std::int64_t h = in[2].shape[1];
    float* y = f(o[0]);
    rows(par, tokens, [&](std::size_t t) {
      const float* w = f(in[2]) + static_cast<std::int64_t>(ids[t]) * h;
      const float* p =
          f(in[3]) + static_cast<std::int64_t>(positions ? n(positions[t]) : t % n(seq)) * h;
      const float* ty = f(in[4]) + static_cast<std::int64_t>(types[t]) * h;
      for (std::int64_t c = 0; c < h; ++c)
        y[static_cast<std::int64_t>(t) * h + c] = w[c] + p[c] + ty[c];
    });
  });
}

std::unique_ptr<Kernel> embedding_backward(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t tokens = desc.input_shapes.at(0).at(0), h = desc.input_shapes.at(0).at(1);
  const std::int64_t seq = desc.attrs_as<EmbeddingAttrs>().seq;
  return std::make_unique<FunctionKernel>("embedding_backward", 0.0, [=](auto in, auto o) {
    const float* dy = f(in[0]);
    const std::int32_t *ids = ints(in[1]), *types = ints(in[2]);
    const std::int32_t* positions = in.size() > 3 ? ints(in[3]) : nullptr;
    if (positions) check_position_ids(positions, tokens, o[1].shape[0]);
    // Tokens may share a row: split the hidden columns instead, each range
    // adding every token in order.
    par(h, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t t = 0; t < tokens; ++t) {
        const std::int64_t position = positions ? positions[t] : t % seq;
        float* rows3[3] = {f(o[0]) + ids[t] * h, f(o[1]) + position * h, f(o[2]) + types[t] * h};
        for (float* r : rows3)
          for (std::int64_t c = first; c < last; ++c) r[c] += dy[t * h + c];
      }
    });
  });
}

std::unique_ptr<Kernel> take_rows_backward(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t stride = desc.attrs_as<RowStrideAttrs>().stride,
                     rows_out = desc.input_shapes.at(0).at(0);
  const std::int64_t h = desc.input_shapes.at(0).at(1);
  return std::make_unique<FunctionKernel>("take_rows_backward", 0.0, [=](auto in, auto o) {
    rows(par, rows_out, [&](std::size_t r) {
      for (std::size_t c = 0; c < n(h); ++c)
        f(o[0])[r * n(stride * h) + c] += f(in[0])[r * n(h) + c];
    });
  });
}

/// in: X[T,H], positions[R] (i32) -> Y[R,H] = rows of X.
std::unique_ptr<Kernel> gather_rows(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t tokens = desc.input_shapes.at(0).at(0), h = desc.input_shapes.at(0).at(1);
  const std::int64_t count = desc.input_shapes.at(1).at(0);
  return std::make_unique<FunctionKernel>("gather_rows", 0.0, [=](auto in, auto o) {
    const std::int32_t* positions = ints(in[1]);
    for (std::int64_t r = 0; r < count; ++r) {
      if (positions[r] < 0 || positions[r] >= tokens) {
        throw RuntimeFailure(
            fmt::format("gather_rows: position {} is outside the {} rows", positions[r], tokens));
      }
    }
    rows(par, count, [&](std::size_t r) {
      std::copy_n(f(in[0]) + positions[r] * h, h, f(o[0]) + static_cast<std::int64_t>(r) * h);
    });
  });
}

/// in: dY[R,H], positions[R] -> dX[T,H] overwritten: zero, then each dY row
/// added at its position (positions may repeat). Columns are split, rows
/// added in order.
std::unique_ptr<Kernel> gather_rows_backward(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t count = desc.input_shapes.at(0).at(0), h = desc.input_shapes.at(0).at(1);
  return std::make_unique<FunctionKernel>("gather_rows_backward", 0.0, [=](auto in, auto o) {
    const std::int32_t* positions = ints(in[1]);
    float* dx = f(o[0]);
    const float* dy = f(in[0]);
    const std::int64_t tokens = o[0].shape[0];
    par(tokens, [&](std::int64_t begin, std::int64_t end) {
      std::fill(dx + begin * h, dx + end * h, 0.0f);
    });
    par(h, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t r = 0; r < count; ++r)
        for (std::int64_t c = first; c < last; ++c) dx[positions[r] * h + c] += dy[r * h + c];
    });
  });
}

/// Cross-entropy of logits rows against labels (-100 ignored), mean over
/// counted rows; writes the loss and d(loss)/d(logits) scaled by `scale`.
double cross_entropy(const ParallelFor& par, const float* logits, const std::int32_t* labels,
                     std::int64_t count, std::int64_t classes, float* dlogits, float scale) {
  std::int64_t counted = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    if (labels[i] == -100) continue;
    if (labels[i] < 0 || labels[i] >= classes) {  // a crafted data file: never index with it
      throw RuntimeFailure(
          fmt::format("label {} of row {} is outside [0, {}) (or -100)", labels[i], i, classes));
    }
    ++counted;
  }
  std::vector<double> row_loss(n(count));
  rows(par, count, [&](std::size_t i) {
    const float* row = logits + i * n(classes);
    float* drow = dlogits + i * n(classes);
    if (labels[i] == -100 || counted == 0) {
      std::fill(drow, drow + classes, 0.0f);
      return;
    }
    const float max_logit = *std::max_element(row, row + classes);
    double total = 0;
    for (std::int64_t c = 0; c < classes; ++c)
      total += std::exp(static_cast<double>(row[c] - max_logit));
    row_loss[i] = std::log(total) + max_logit - row[labels[i]];
    for (std::int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(static_cast<double>(row[c] - max_logit)) / total;
      drow[c] = static_cast<float>((p - (c == labels[i] ? 1.0 : 0.0)) /
                                   static_cast<double>(counted) * scale);
    }
  });
  double loss = 0;
  for (double l : row_loss) loss += l;
  return counted == 0 ? 0.0 : loss / static_cast<double>(counted);
}

std::unique_ptr<Kernel> pretraining_loss(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t tokens = desc.input_shapes.at(0).at(0), vocab = desc.input_shapes.at(0).at(1);
  const std::int64_t batch = desc.input_shapes.at(2).at(0);
  return std::make_unique<FunctionKernel>("pretraining_loss", 0.0, [=](auto in, auto o) {
    const float scale = f(in[4])[0];  // loss scale: gradients come out multiplied by it
    f(o[0])[0] = static_cast<float>(
        cross_entropy(par, f(in[0]), ints(in[1]), tokens, vocab, f(o[1]), scale));
    f(o[0])[1] =
        static_cast<float>(cross_entropy(par, f(in[2]), ints(in[3]), batch, 2, f(o[2]), scale));
  });
}

/// Span loss over packed rows: the sequence in slot j of row b is the
/// tokens whose mask is j + 1, and its start and end softmaxes run over those
/// tokens only. Positions index the row (0..S-1); -100 marks an empty slot.
/// Means over the counted slots, as the unpacked loss over its sequences.
std::unique_ptr<Kernel> packed_span_loss(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t rows_in = desc.input_shapes.at(3).at(0), seq = desc.input_shapes.at(3).at(1);
  const std::int64_t slots = desc.input_shapes.at(1).at(0);
  if (rows_in < 1 || slots % rows_in != 0 || desc.input_shapes.at(0).at(0) != rows_in * seq) {
    throw RuntimeFailure(fmt::format("span_loss: {} span slots, {} tokens and a [{}, {}] mask",
                                     slots, desc.input_shapes.at(0).at(0), rows_in, seq));
  }
  const std::int64_t per_row = slots / rows_in;
  return std::make_unique<FunctionKernel>("span_loss", 0.0, [=](auto in, auto o) {
    const float* logits = f(in[0]);
    const std::int32_t *positions = ints(in[1]), *mask = ints(in[3]);
    const float scale = f(in[2])[0];
    float* dlogits = f(o[1]);
    std::fill(dlogits, dlogits + rows_in * seq * 2, 0.0f);
    double total = 0;
    for (std::int64_t which = 0; which < 2; ++which) {  // start, then end
      std::int64_t counted = 0;
      for (std::int64_t slot = 0; slot < slots; ++slot) {
        const std::int32_t p = positions[slot * 2 + which];
        if (p == -100) continue;
        const std::int64_t row = slot / per_row;
        if (p < 0 || p >= seq || mask[row * seq + p] != slot % per_row + 1) {
          throw RuntimeFailure(fmt::format(
              "span_loss: {} position {} of row {}, sequence {} is not a token of that sequence",
              which == 0 ? "start" : "end", p, row, slot % per_row + 1));
        }
        ++counted;
      }
      if (counted == 0) continue;
      std::vector<double> slot_loss(n(slots));
      rows(par, slots, [&](std::size_t slot) {
        const std::int32_t label = positions[slot * 2 + n(which)];
        if (label == -100) return;
        const std::size_t row = slot / n(per_row);
        const auto sequence = static_cast<std::int32_t>(slot % n(per_row) + 1);
        const std::int32_t* row_mask = mask + row * n(seq);
        const float* row_logits = logits + row * n(seq) * 2;
        float largest = -std::numeric_limits<float>::infinity();
        for (std::size_t t = 0; t < n(seq); ++t)
          if (row_mask[t] == sequence) largest = std::max(largest, row_logits[t * 2 + n(which)]);
        double sum = 0;
        for (std::size_t t = 0; t < n(seq); ++t)
          if (row_mask[t] == sequence)
            sum += std::exp(static_cast<double>(row_logits[t * 2 + n(which)] - largest));
        slot_loss[slot] = std::log(sum) + largest - row_logits[n(label) * 2 + n(which)];
        float* drow = dlogits + row * n(seq) * 2;
        for (std::size_t t = 0; t < n(seq); ++t) {
          if (row_mask[t] != sequence) continue;
          const double p =
              std::exp(static_cast<double>(row_logits[t * 2 + n(which)] - largest)) / sum;
          drow[t * 2 + n(which)] = static_cast<float>((p - (t == n(label) ? 1.0 : 0.0)) /
                                                      static_cast<double>(counted) * scale / 2.0);
        }
      });
      double loss = 0;
      for (const double l : slot_loss) loss += l;
      total += loss / static_cast<double>(counted);
    }
    f(o[0])[0] = static_cast<float>(total / 2.0);
  });
}

std::unique_ptr<Kernel> span_loss(const KernelDesc& desc, const ParallelFor& par) {
  if (desc.input_shapes.size() > 3) return packed_span_loss(desc, par);
  const std::int64_t tokens = desc.input_shapes.at(0).at(0);
  const std::int64_t batch = desc.input_shapes.at(1).at(0);
  if (batch < 1 || tokens % batch != 0)
    throw RuntimeFailure(fmt::format("span_loss: {} tokens are not {} sequences", tokens, batch));
  const std::int64_t seq = tokens / batch;
  return std::make_unique<FunctionKernel>("span_loss", 0.0, [=](auto in, auto o) {
    const float* logits = f(in[0]);
    const std::int32_t* positions = ints(in[1]);
    const float scale = f(in[2])[0];
    float* dlogits = f(o[1]);
    std::vector<float> row(n(seq)), drow(n(seq));
    std::vector<std::int32_t> label(n(batch));
    double total = 0;
    for (std::int64_t which = 0; which < 2; ++which) {  // start, then end
      // Clamped to [0, S]; S (a position past the sequence) is ignored.
      for (std::int64_t b = 0; b < batch; ++b) {
        const std::int64_t p = std::clamp<std::int64_t>(positions[b * 2 + which], 0, seq);
        label[n(b)] = p == seq ? -100 : static_cast<std::int32_t>(p);
      }
      std::vector<float> column(n(tokens)), dcolumn(n(tokens));
      for (std::int64_t t = 0; t < tokens; ++t) column[n(t)] = logits[t * 2 + which];
      total +=
          cross_entropy(par, column.data(), label.data(), batch, seq, dcolumn.data(), scale / 2.0f);
      for (std::int64_t t = 0; t < tokens; ++t) dlogits[t * 2 + which] = dcolumn[n(t)];
    }
    f(o[0])[0] = static_cast<float>(total / 2.0);
  });
}

std::unique_ptr<Kernel> classification_loss(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t rows = desc.input_shapes.at(0).at(0), classes = desc.input_shapes.at(0).at(1);
  return std::make_unique<FunctionKernel>("classification_loss", 0.0, [=](auto in, auto o) {
    f(o[0])[0] = static_cast<float>(
        cross_entropy(par, f(in[0]), ints(in[1]), rows, classes, f(o[1]), f(in[2])[0]));
  });
}

std::unique_ptr<Kernel> regression_loss(const KernelDesc& desc, const ParallelFor&) {
  const std::int64_t rows = desc.input_shapes.at(0).at(0);
  return std::make_unique<FunctionKernel>("regression_loss", 0.0, [=](auto in, auto o) {
    const float *predicted = f(in[0]), *target = f(in[1]);
    const float scale = f(in[2])[0];
    double sum = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const double error = static_cast<double>(predicted[r]) - target[r];
      sum += error * error;
      f(o[1])[r] = static_cast<float>(2.0 * error / static_cast<double>(rows) * scale);
    }
    f(o[0])[0] = static_cast<float>(sum / static_cast<double>(rows));
  });
}

/// One optimizer step for one parameter tensor, in place: constant
/// hyper-parameters from OptimizerUpdateAttrs, lr / step / gradient scale
/// from the OptimizerStep tensor (input 4).
/// LAMB needs the norms of the weights and of the whole update before it can
/// apply any of it: the first pass updates m and v and sums the norms, the
/// second recomputes the update from them (cheaper than storing it).
std::unique_ptr<Kernel> optimizer_update(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t count = element_count(desc.input_shapes.at(0));
  const OpKind kind = desc.op;
  const OptimizerUpdateAttrs attrs = desc.attrs_as<OptimizerUpdateAttrs>();
  // The element math is f32, as PyTorch's optimizers do.
  const auto beta1 = static_cast<float>(attrs.hyper.beta1),
             beta2 = static_cast<float>(attrs.hyper.beta2),
             eps = static_cast<float>(attrs.hyper.epsilon),
             momentum = static_cast<float>(attrs.hyper.momentum);
  const float decay = attrs.decay ? static_cast<float>(attrs.hyper.weight_decay) : 0.0f;
  const bool trust = attrs.trust_ratio;
  const auto update = [=](std::span<const Tensor> in, std::span<const Tensor> o) {
    float *w = f(o[0]), *m = f(o[1]), *v = f(o[2]);
    const float* g = f(in[1]);
    float* consumed = f(o[3]);  // the gradient, zeroed once read for the next accumulation
    const OptimizerStep now = read_optimizer_step(in[4]);
    const auto lr = static_cast<float>(now.learning_rate);
    const auto grad_scale = static_cast<float>(now.grad_scale);
    const auto step = static_cast<double>(now.step);
    if (kind == OpKind::sgd_update) {  // m is the momentum buffer
      par(count, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          const float grad = g[i] * grad_scale + decay * w[i];
          m[i] = momentum * m[i] + grad;
          w[i] -= lr * m[i];
          consumed[i] = 0.0f;
        }
      });
      return;
    }
    // Bias corrections in double (1 - beta^step loses digits in f32 for
    // beta2 near 1), the per-element math in f32 as PyTorch's optimizers do.
    const auto inv_c1 = static_cast<float>(1.0 / (1.0 - std::pow(beta1, step)));
    const auto inv_c2 = static_cast<float>(1.0 / (1.0 - std::pow(beta2, step)));
    const bool lamb = kind == OpKind::lamb_update;
    // Adam's direction from the updated moments, plus LAMB's decoupled decay.
    const auto direction = [=](std::int64_t i) {
      float u = m[i] * inv_c1 / (std::sqrt(v[i] * inv_c2) + eps);
      if (lamb) u += decay * w[i];
      return u;
    };
    const auto moments = [=](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        const float grad = g[i] * grad_scale;
        m[i] = beta1 * m[i] + (1 - beta1) * grad;
        v[i] = beta2 * v[i] + (1 - beta2) * grad * grad;
      }
    };
    double ratio = 1.0;
    if (lamb && trust) {  // norms of w and of the update, from the moments just written
      const auto norms =
          deterministic_sums<2>(par, count, kSumGrain, [&](std::int64_t begin, std::int64_t end) {
            moments(begin, end);
            std::array<double, 2> sums{};
            for (std::int64_t i = begin; i < end; ++i) {
              const double u = direction(i);
              sums[0] += static_cast<double>(w[i]) * w[i];
              sums[1] += u * u;
            }
            return sums;
          });
      if (norms[0] > 0 && norms[1] > 0) ratio = std::sqrt(norms[0]) / std::sqrt(norms[1]);
      par(count, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          w[i] -= static_cast<float>(lr * ratio) * direction(i);
          consumed[i] = 0.0f;
        }
      });
      return;
    }
    par(count, [&](std::int64_t begin, std::int64_t end) {
      moments(begin, end);
      for (std::int64_t i = begin; i < end; ++i) {
        const float u = direction(i);
        w[i] -= lamb ? lr * u : lr * (u + decay * w[i]);
        consumed[i] = 0.0f;
      }
    });
  };
  return std::make_unique<FunctionKernel>(std::string(op_name(kind)), 0.0, [=](auto in, auto o) {
    update(in, o);
    if (o.size() > 4) {  // the compute copy (with_stored_precision narrows it)
      par(count, [&](std::int64_t begin, std::int64_t end) {
        std::copy(f(o[0]) + begin, f(o[0]) + end, f(o[4]) + begin);
      });
    }
  });
}

/// Inverted dropout (dropout_mask.hpp); "dropout" and "dropout_backward" are
/// the same product with the same regenerated mask.
/// in: X (or dY), rng[2] (i32: seed, counter) -> Y = X * mask (or dX).
std::unique_ptr<Kernel> dropout(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t count = element_count(desc.input_shapes.at(0));
  const double p = desc.attrs_as<DropoutAttrs>().p;
  const std::uint64_t stream = desc.attrs_as<DropoutAttrs>().stream;
  return std::make_unique<FunctionKernel>("dropout", 0.0, [=](auto in, auto o) {
    const DropoutMask drop(ints(in[1]), stream, p);
    par(count, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        f(o[0])[i] = f(in[0])[i] * drop(static_cast<std::uint64_t>(i));
      }
    });
  });
}

/// X -> Y, f32 to f32: with_stored_precision narrows Y to round_to.
std::unique_ptr<Kernel> cast(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t count = element_count(desc.input_shapes.at(0));
  return std::make_unique<FunctionKernel>("cast", 0.0, [=](auto in, auto o) {
    par(count, [&](std::int64_t begin, std::int64_t end) {
      std::copy(f(in[0]) + begin, f(in[0]) + end, f(o[0]) + begin);
    });
  });
}

std::unique_ptr<Kernel> sum_of_squares(const KernelDesc& desc, const ParallelFor& par) {
  const std::int64_t count = element_count(desc.input_shapes.at(0));
  return std::make_unique<FunctionKernel>("sum_of_squares", 0.0, [=](auto in, auto o) {
    const float* x = f(in[0]);
    f(o[0])[0] = static_cast<float>(
        deterministic_sum(par, count, kSumGrain, [&](std::int64_t begin, std::int64_t end) {
          double sum = 0;
          for (std::int64_t i = begin; i < end; ++i) sum += static_cast<double>(x[i]) * x[i];
          return sum;
        }));
  });
}

}  // namespace

OptimizerStep read_optimizer_step(const Tensor& step) {
  if (step.dtype != DType::i64 || step.numel() != kOptimizerStepWords) {
    throw RuntimeFailure(fmt::format("optimizer step tensor must be i64[{}], got {}[{}]",
                                     kOptimizerStepWords, dtype_name(step.dtype), step.numel()));
  }
  OptimizerStep values;
  std::memcpy(&values, step.buffer->data(), sizeof values);
  return values;
}

std::array<std::int64_t, kOptimizerStepWords> optimizer_step_words(const OptimizerStep& step) {
  std::array<std::int64_t, kOptimizerStepWords> words{};
  std::memcpy(words.data(), &step, sizeof step);
  return words;
}

void register_reference_train_kernels(KernelRegistry& registry, ParallelFor parallel,
                                      MatMulNumerics numerics) {
  if (!parallel) parallel = tbb_parallel_for();
  const auto add = [&](OpKind op,
                       std::unique_ptr<Kernel> (*make)(const KernelDesc&, const ParallelFor&)) {
    registry.add(
        op, DType::f32,
        [make, parallel, numerics](const KernelDesc& d, Device&) -> std::unique_ptr<Kernel> {
          return with_stored_precision(make(d, parallel), d, parallel, numerics);
        });
  };
  // The GEMM-like ops sum in f16 when the device has f16 partials and the
  // op computes at f16.
  const auto add_gemm = [&](OpKind op, std::unique_ptr<Kernel> (*make)(const KernelDesc&,
                                                                       const ParallelFor&, bool)) {
    registry.add(
        op, DType::f32,
        [make, parallel, numerics](const KernelDesc& d, Device&) -> std::unique_ptr<Kernel> {
          const bool partials = round_type(d) == DType::f16 && numerics.accumulate == DType::f16;
          return with_stored_precision(make(d, parallel, partials), d, parallel, numerics);
        });
  };
  add_gemm(OpKind::dense, dense);
  add_gemm(OpKind::dense_backward, dense_backward);
  for (OpKind op : {OpKind::gelu, OpKind::gelu_backward, OpKind::tanh, OpKind::tanh_backward,
                    OpKind::relu, OpKind::relu_backward, OpKind::add})
    add(op, elementwise);
  add(OpKind::layernorm_train, layernorm_train);
  add(OpKind::layernorm_backward, layernorm_backward);
  add_gemm(OpKind::attention_train, attention_train);
  add_gemm(OpKind::attention_backward, attention_backward);
  add_gemm(OpKind::relative_attention_train, attention_train);
  add_gemm(OpKind::relative_attention_backward, attention_backward);
  add(OpKind::embedding_train, embedding_train);
  add(OpKind::embedding_backward, embedding_backward);
  add(OpKind::take_rows_backward, take_rows_backward);
  add(OpKind::gather_rows, gather_rows);
  add(OpKind::gather_rows_backward, gather_rows_backward);
  add(OpKind::pretraining_loss, pretraining_loss);
  add(OpKind::sum_of_squares, sum_of_squares);
  add(OpKind::dropout, dropout);
  add(OpKind::dropout_backward, dropout);
  for (OpKind op : {OpKind::adamw_update, OpKind::lamb_update, OpKind::sgd_update})
    add(op, optimizer_update);
  add(OpKind::cast, cast);
  add(OpKind::span_loss, span_loss);
  add(OpKind::classification_loss, classification_loss);
  add(OpKind::regression_loss, regression_loss);
  add_gemm(OpKind::grouped_dense, detail::grouped_dense);
  add_gemm(OpKind::grouped_dense_backward, detail::grouped_dense_backward);
  add_gemm(OpKind::sequence_conv, detail::sequence_conv);
  add_gemm(OpKind::sequence_conv_backward, detail::sequence_conv_backward);
  for (OpKind op : {OpKind::glu, OpKind::glu_backward, OpKind::swish, OpKind::swish_backward})
    add(op, detail::gated_elementwise);
  add(OpKind::rotary, detail::rotary);
  add(OpKind::rotary_backward, detail::rotary);
  add(OpKind::geglu, detail::geglu);
  add(OpKind::geglu_backward, detail::geglu);
  add(OpKind::mean_pool, detail::mean_pool);
  add(OpKind::mean_pool_backward, detail::mean_pool);
}

}  // namespace polyhal
