// ModernBERT's ops on the reference path: rotary positions on a fused QKV
// (transformers' rotate_half layout) and GeGLU. Contracts: train_kernels.hpp.
#include "kernels/reference_modernbert_kernels.hpp"

#include <cmath>
#include <vector>

#include "kernels/function_kernel.hpp"

namespace polyhal::detail {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

void require(bool ok, const KernelDesc& d, const char* what) {
  if (!ok) throw RuntimeFailure(fmt::format("{}: {}", d.to_string(), what));
}

/// The d/2 frequencies theta^(-2c/d), in f32 as transformers computes its
/// inv_freq (the powers of an f32 exponent).
std::vector<float> inverse_frequencies(double theta, std::int64_t d) {
  std::vector<float> inv(n(d / 2));
  for (std::size_t c = 0; c < inv.size(); ++c)
    inv[c] = 1.0f /
             std::pow(static_cast<float>(theta), static_cast<float>(2 * c) / static_cast<float>(d));
  return inv;
}

}  // namespace

std::unique_ptr<Kernel> rotary(const KernelDesc& d, const ParallelFor& par) {
  const auto& attrs = d.attrs_as<RotaryAttrs>();
  require(d.input_shapes.size() == 1 || d.input_shapes.size() == 2, d,
          "expects QKV [tokens, 3H] and optional position ids [tokens]");
  const Shape& shape = d.input_shapes[0];
  require(shape.size() == 2 && shape[1] % 3 == 0 && attrs.heads > 0 && attrs.seq > 0, d,
          "QKV must be [tokens, 3H]");
  const std::int64_t tokens = shape[0], h = shape[1] / 3;
  require(h % attrs.heads == 0 && (h / attrs.heads) % 2 == 0, d,
          "the head size must divide the hidden size and be even");
  require(d.input_shapes.size() == 1 || d.input_shapes[1] == Shape{tokens}, d,
          "position ids must be [tokens]");
  const std::int64_t head_dim = h / attrs.heads, seq = attrs.seq, heads = attrs.heads;
  const auto inv = inverse_frequencies(attrs.theta, head_dim);
  // The inverse rotation turns the gradient of the rotated q and k into theirs.
  const float direction = d.op == OpKind::rotary_backward ? -1.0f : 1.0f;
  return std::make_unique<FunctionKernel>(
      std::string(op_name(d.op)), 6.0 * static_cast<double>(tokens * 2 * h), [=](auto in, auto o) {
        const float* x = f(in[0]);
        const std::int32_t* positions = in.size() > 1 ? ints(in[1]) : nullptr;
        if (positions)
          for (std::int64_t t = 0; t < tokens; ++t)
            if (positions[t] < 0)
              throw RuntimeFailure(
                  fmt::format("rotary: position id {} of token {} is negative", positions[t], t));
        float* y = f(o[0]);
        rows(par, tokens, [&](std::size_t t) {
          const float position =
              static_cast<float>(positions ? positions[t] : static_cast<std::int32_t>(t % n(seq)));
          const std::size_t half = n(head_dim / 2);
          std::vector<float> cos_v(half), sin_v(half);
          for (std::size_t c = 0; c < half; ++c) {
            const float angle = position * inv[c];  // f32, as transformers' freqs
            cos_v[c] = std::cos(angle);
            sin_v[c] = direction * std::sin(angle);
          }
          const float* row = x + t * n(3 * h);
          float* out = y + t * n(3 * h);
          for (std::size_t block = 0; block < 2 * n(heads); ++block) {  // q heads, then k heads
            const float* v = row + block * n(head_dim);
            float* w = out + block * n(head_dim);
            for (std::size_t c = 0; c < half; ++c) {
              w[c] = v[c] * cos_v[c] - v[c + half] * sin_v[c];
              w[c + half] = v[c + half] * cos_v[c] + v[c] * sin_v[c];
            }
          }
          std::copy(row + 2 * h, row + 3 * h, out + 2 * h);  // v as it is
        });
      });
}

std::unique_ptr<Kernel> geglu(const KernelDesc& d, const ParallelFor& par) {
  const bool backward = d.op == OpKind::geglu_backward;
  const std::size_t a_input = backward ? 1 : 0;
  require(d.input_shapes.size() == a_input + 1 && d.input_shapes[a_input].size() == 2 &&
              d.input_shapes[a_input][1] % 2 == 0,
          d, "expects A [rows, 2N] (inputs, then gates)");
  const std::int64_t m = d.input_shapes[a_input][0], width = d.input_shapes[a_input][1],
                     half = width / 2;
  return std::make_unique<FunctionKernel>(std::string(op_name(d.op)), 0.0, [=](auto in, auto o) {
    const float* a = f(in[a_input]);
    const float* dy = backward ? f(in[0]) : nullptr;
    float* y = f(o[0]);
    rows(par, m, [&](std::size_t r) {
      const float* inputs = a + r * n(width);
      const float* gates = inputs + half;
      for (std::size_t j = 0; j < n(half); ++j) {
        const float x = inputs[j];
        const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
        const float gelu = x * cdf;
        if (!dy) {
          y[r * n(half) + j] = gelu * gates[j];
          continue;
        }
        const float g = dy[r * n(half) + j];
        y[r * n(width) + j] = g * gates[j] * (cdf + x * kInvSqrt2Pi * std::exp(-0.5f * x * x));
        y[r * n(width) + n(half) + j] = g * gelu;
      }
    });
  });
}

std::unique_ptr<Kernel> mean_pool(const KernelDesc& d, const ParallelFor& par) {
  const bool backward = d.op == OpKind::mean_pool_backward;
  require(
      d.input_shapes.size() == 2 && d.input_shapes[0].size() == 2 && d.input_shapes[1].size() == 2,
      d, "expects a [rows, H] tensor and the mask [B, S]");
  const std::int64_t b = d.input_shapes[1][0], s = d.input_shapes[1][1], h = d.input_shapes[0][1];
  require(d.input_shapes[0][0] == (backward ? b : b * s), d,
          "the tensor's rows do not match the mask's [B, S]");
  return std::make_unique<FunctionKernel>(std::string(op_name(d.op)), 0.0, [=](auto in, auto o) {
    const float* x = f(in[0]);
    const std::int32_t* mask = ints(in[1]);
    float* y = f(o[0]);
    rows(par, b, [&](std::size_t r) {
      std::int64_t count = 0;
      for (std::size_t t = 0; t < n(s); ++t) count += mask[r * n(s) + t] != 0 ? 1 : 0;
      const float inv = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
      if (backward) {  // each token's share of its row's gradient
        for (std::size_t t = 0; t < n(s); ++t) {
          float* dx = y + (r * n(s) + t) * n(h);
          const bool token = mask[r * n(s) + t] != 0;
          for (std::size_t c = 0; c < n(h); ++c) dx[c] = token ? x[r * n(h) + c] * inv : 0.0f;
        }
        return;
      }
      float* out = y + r * n(h);
      std::fill(out, out + h, 0.0f);
      for (std::size_t t = 0; t < n(s); ++t) {
        if (mask[r * n(s) + t] == 0) continue;
        const float* row = x + (r * n(s) + t) * n(h);
        for (std::size_t c = 0; c < n(h); ++c) out[c] += row[c];
      }
      if (count > 0)  // a division, as transformers' sum / count
        for (std::size_t c = 0; c < n(h); ++c) out[c] /= static_cast<float>(count);
    });
  });
}

}  // namespace polyhal::detail
