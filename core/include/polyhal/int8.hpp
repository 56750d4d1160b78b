#pragma once
/// @file int8.hpp
/// The int8 quantisation of LinearAttrs::math = int8 (op_schema.hpp), in one
/// place so that every kernel (reference, CPU plugin) computes alike:
/// symmetric (no zero point), round to nearest even, X saturated to s8's
/// [-128, 127] as oneDNN's reorders do, W per output channel (its largest
/// value maps to 127, so W stays in [-127, 127]). X has one step for the
/// whole tensor (static: LinearAttrs::input_scale, calibrated) or one per
/// row, max |x_row| / 127, computed as the linear runs (dynamic). A dynamic
/// linear whose input is a GELU output (LinearAttrs::input_activation) uses
/// all 8 bits instead: x + kGeluShift >= 0 is quantised to u8 with the step
/// max_row(x + kGeluShift) / 255, and the shift's share, kGeluShift times
/// each output channel's (dequantised) weight sum, comes off the bias.
///
/// Smoothing (SmoothQuant, Xiao et al. 2023): a dynamic s8 linear may be
/// given a third constant s[K] (f32, > 0). X's column k is then multiplied
/// by 1 / s[k] (in f32) before its row is quantised, and W's column k by
/// s[k] before W is quantised per channel: X W^T is unchanged, but input
/// channels with outliers (a LayerNorm output's few large dimensions) no
/// longer set every other channel's step.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

namespace polyhal {

/// The largest |q| of a quantised value.
inline constexpr float kInt8Max = 127.0f;
/// The largest |q| of a seven-bit weight (above).
inline constexpr float kInt7Max = 63.0f;

/// q = round(x * inverse_scale) to nearest even, saturated to [-128, 127];
/// NaN becomes 0.
inline std::int8_t quantize_s8(float x, float inverse_scale) noexcept {
  const float v = std::nearbyint(x * inverse_scale);
  if (!(v == v)) return 0;
  return static_cast<std::int8_t>(std::clamp(v, -128.0f, kInt8Max));
}

/// The step of a tensor whose largest |x| is `max_abs`: max_abs / 127, or 1
/// for an all-zero (or non-finite) range, so that dividing by it is safe.
inline float int8_scale(float max_abs) noexcept {
  return std::isfinite(max_abs) && max_abs > 0.0f ? max_abs / kInt8Max : 1.0f;
}

/// Quantises W[N, K] (row-major, f32) per output channel n: scales[n] =
/// max |W[n, :]| / weight_max (int8_scale's rule), q[n * K + k] =
/// quantize_s8(W[n, k], 1 / scales[n]). `weight_max` is kInt8Max, or
/// kInt7Max for seven-bit weights.
inline void quantize_weights_per_channel(std::span<const float> w, std::int64_t n, std::int64_t k,
                                         std::span<std::int8_t> q, std::span<float> scales,
                                         float weight_max = kInt8Max) noexcept {
  for (std::int64_t row = 0; row < n; ++row) {
    const float* in = w.data() + row * k;
    float max_abs = 0.0f;
    for (std::int64_t i = 0; i < k; ++i) max_abs = std::max(max_abs, std::fabs(in[i]));
    const float scale = std::isfinite(max_abs) && max_abs > 0.0f ? max_abs / weight_max : 1.0f;
    scales[static_cast<std::size_t>(row)] = scale;
    const float inverse = 1.0f / scale;
    for (std::int64_t i = 0; i < k; ++i)
      q[static_cast<std::size_t>(row * k + i)] = quantize_s8(in[i], inverse);
  }
}

/// Dynamic quantisation of one row: returns its step int8_scale(max |x|)
/// and writes q[i] = quantize_s8(x[i], 1 / step).
inline float quantize_row_s8(std::span<const float> x, std::span<std::int8_t> q) noexcept {
  float max_abs = 0.0f;
  for (const float v : x) max_abs = std::max(max_abs, std::fabs(v));
  const float step = int8_scale(max_abs);
  const float inverse = 1.0f / step;
  for (std::size_t i = 0; i < x.size(); ++i) q[i] = quantize_s8(x[i], inverse);
  return step;
}

/// Why `smoothing` cannot smooth a linear's K input channels, or empty: the
/// kernels' one check of the third constant.
inline const char* int8_smoothing_problem(std::span<const float> smoothing,
                                          std::int64_t k) noexcept {
  if (static_cast<std::int64_t>(smoothing.size()) != k) return "smoothing must hold K values";
  for (const float v : smoothing)
    if (!(std::isfinite(v) && v > 0.0f)) return "smoothing values must be finite and > 0";
  return "";
}

/// W[N, K] (row-major) with column k multiplied by smoothing[k].
inline void smooth_weights(std::span<float> w, std::int64_t n, std::int64_t k,
                           std::span<const float> smoothing) noexcept {
  for (std::int64_t row = 0; row < n; ++row)
    for (std::int64_t i = 0; i < k; ++i)
      w[static_cast<std::size_t>(row * k + i)] *= smoothing[static_cast<std::size_t>(i)];
}

/// GELU(x) >= -0.16997 for every x (its minimum, at x = -0.7518): adding
/// this makes a GELU output non-negative.
inline constexpr float kGeluShift = 0.17f;

/// Dynamic u8 quantisation of a row of GELU outputs: returns its step
/// (max(x + kGeluShift) / 255, or 1) and writes q[i] = round(max(x[i] +
/// kGeluShift, 0) / step) to nearest even, saturated to 255; NaN becomes 0.
inline float quantize_gelu_row_u8(std::span<const float> x, std::span<std::uint8_t> q) noexcept {
  float max_value = 0.0f;
  for (const float v : x) max_value = std::max(max_value, v + kGeluShift);
  const float step = std::isfinite(max_value) && max_value > 0.0f ? max_value / 255.0f : 1.0f;
  const float inverse = 1.0f / step;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = std::nearbyint(std::max(x[i] + kGeluShift, 0.0f) * inverse);
    q[i] = v == v ? static_cast<std::uint8_t>(std::min(v, 255.0f)) : std::uint8_t{0};
  }
  return step;
}

/// The bias of a linear whose input was shifted by kGeluShift: b[n] -=
/// kGeluShift * (weight_step[n] * sum_k q[n, k]), q the s8 weights (as
/// exact small integers, [N, K] row-major, or [K, N] when `transposed`).
template <class Weights>
void subtract_gelu_shift(const Weights& q, std::int64_t n, std::int64_t k,
                         std::span<const float> weight_step, std::span<float> bias,
                         bool transposed) noexcept {
  for (std::int64_t row = 0; row < n; ++row) {
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < k; ++i)
      sum += static_cast<std::int64_t>(
          q[static_cast<std::size_t>(transposed ? i * n + row : row * k + i)]);
    const auto r = static_cast<std::size_t>(row);
    bias[r] -= kGeluShift * (weight_step[r] * static_cast<float>(sum));
  }
}

}  // namespace polyhal
