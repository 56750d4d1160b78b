// The optimizer on the CPU (train_kernels.hpp lamb_update, adamw_update and
// sum_of_squares), AVX-512 on the OpenMP pool. The update is memory-bound
// only once it is vectorised: the reference's scalar sqrt and division per
// element cost more than the 28 bytes per parameter it moves.
//
// Same numbers as the reference kernels: the per-element math is the same
// sequence of IEEE f32 operations (no fused multiply-add, sqrt and division
// correctly rounded in both), so weights and moments match bit for bit; the
// norms are summed in double over the same fixed chunks (kSumGrain) in a
// fixed lane order, so they do not depend on the thread count (a resumed run
// repeats an uninterrupted one), though they may differ from the reference's
// in the last bits.
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* in the
// conversions and reductions: GCC bug 105593), not about this file's code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "omp_optimizer.hpp"
#include "onednn_matmul.hpp"
#include "polyhal/parallel.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

/// Elements per chunk of a norm sum, as the reference kernels.
constexpr std::int64_t kSumGrain = 1 << 15;
constexpr std::int64_t kLanes = 16;

/// The f32 constants of one update, computed as the reference computes them.
struct AdamScalars {
  float beta1, beta2, grad_scale, inv_c1, inv_c2, eps;
  float lamb_decay;   // added to the direction (LAMB), 0 for AdamW
  float adamw_decay;  // added to the step (AdamW), 0 for LAMB
};

/// Moments and direction for one element, in the reference's order.
float scalar_direction(const AdamScalars& a, float g, float& m, float& v, float w) {
  const float grad = g * a.grad_scale;
  m = a.beta1 * m + (1 - a.beta1) * grad;
  v = a.beta2 * v + (1 - a.beta2) * grad * grad;
  return m * a.inv_c1 / (std::sqrt(v * a.inv_c2) + a.eps) + a.lamb_decay * w;
}

/// The same for 16 elements; updates m and v, returns the direction.
__attribute__((target("avx512f"))) inline __m512 vector_direction(const AdamScalars& a,
                                                                  const float* g, float* m,
                                                                  float* v, __m512 w) {
  const __m512 grad = _mm512_mul_ps(_mm512_loadu_ps(g), _mm512_set1_ps(a.grad_scale));
  const __m512 m_new = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(a.beta1), _mm512_loadu_ps(m)),
                                     _mm512_mul_ps(_mm512_set1_ps(1 - a.beta1), grad));
  const __m512 v_new =
      _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(a.beta2), _mm512_loadu_ps(v)),
                    _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(1 - a.beta2), grad), grad));
  _mm512_storeu_ps(m, m_new);
  _mm512_storeu_ps(v, v_new);
  const __m512 denominator = _mm512_add_ps(
      _mm512_sqrt_ps(_mm512_mul_ps(v_new, _mm512_set1_ps(a.inv_c2))), _mm512_set1_ps(a.eps));
  return _mm512_add_ps(_mm512_div_ps(_mm512_mul_ps(m_new, _mm512_set1_ps(a.inv_c1)), denominator),
                       _mm512_mul_ps(_mm512_set1_ps(a.lamb_decay), w));
}

/// The direction from moments already updated (LAMB's second pass).
__attribute__((target("avx512f"))) inline __m512 stored_direction(const AdamScalars& a,
                                                                  const float* m, const float* v,
                                                                  __m512 w) {
  const __m512 denominator =
      _mm512_add_ps(_mm512_sqrt_ps(_mm512_mul_ps(_mm512_loadu_ps(v), _mm512_set1_ps(a.inv_c2))),
                    _mm512_set1_ps(a.eps));
  return _mm512_add_ps(
      _mm512_div_ps(_mm512_mul_ps(_mm512_loadu_ps(m), _mm512_set1_ps(a.inv_c1)), denominator),
      _mm512_mul_ps(_mm512_set1_ps(a.lamb_decay), w));
}

__attribute__((target("avx512f"))) inline void add_squares(__m512d& sum, __m512 x) {
  const __m512d low = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
  const __m512d high =
      _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  sum = _mm512_add_pd(sum, _mm512_mul_pd(low, low));
  sum = _mm512_add_pd(sum, _mm512_mul_pd(high, high));
}

/// LAMB's first pass over [begin, end): moments, and the squared norms of
/// the weights and of the direction (lanes summed in a fixed order).
__attribute__((target("avx512f"))) std::array<double, 2> moments_and_norms(const AdamScalars& a,
                                                                           const float* g, float* m,
                                                                           float* v, const float* w,
                                                                           std::int64_t begin,
                                                                           std::int64_t end) {
  __m512d w_sum = _mm512_setzero_pd(), u_sum = _mm512_setzero_pd();
  std::int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    const __m512 wv = _mm512_loadu_ps(w + i);
    add_squares(w_sum, wv);
    add_squares(u_sum, vector_direction(a, g + i, m + i, v + i, wv));
  }
  std::array<double, 2> sums{_mm512_reduce_add_pd(w_sum), _mm512_reduce_add_pd(u_sum)};
  for (; i < end; ++i) {
    const double u = scalar_direction(a, g[i], m[i], v[i], w[i]);
    sums[0] += static_cast<double>(w[i]) * w[i];
    sums[1] += u * u;
  }
  return sums;
}

/// LAMB's second pass: w -= rate * direction; the gradient zeroed.
__attribute__((target("avx512f"))) void apply_direction(const AdamScalars& a, const float* m,
                                                        const float* v, float* w, float* consumed,
                                                        float rate, std::int64_t begin,
                                                        std::int64_t end) {
  std::int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    const __m512 wv = _mm512_loadu_ps(w + i);
    const __m512 u = stored_direction(a, m + i, v + i, wv);
    _mm512_storeu_ps(w + i, _mm512_sub_ps(wv, _mm512_mul_ps(_mm512_set1_ps(rate), u)));
    _mm512_storeu_ps(consumed + i, _mm512_setzero_ps());
  }
  for (; i < end; ++i) {
    w[i] -= rate * (m[i] * a.inv_c1 / (std::sqrt(v[i] * a.inv_c2) + a.eps) + a.lamb_decay * w[i]);
    consumed[i] = 0.0f;
  }
}

/// One pass (AdamW, or LAMB without the trust ratio): moments, then
/// w -= lr * (direction + adamw_decay * w); the gradient zeroed.
__attribute__((target("avx512f"))) void update_in_one_pass(const AdamScalars& a, const float* g,
                                                           float* m, float* v, float* w,
                                                           float* consumed, float lr,
                                                           std::int64_t begin, std::int64_t end) {
  std::int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    const __m512 wv = _mm512_loadu_ps(w + i);
    __m512 u = vector_direction(a, g + i, m + i, v + i, wv);
    if (a.adamw_decay != 0.0f)
      u = _mm512_add_ps(u, _mm512_mul_ps(_mm512_set1_ps(a.adamw_decay), wv));
    _mm512_storeu_ps(w + i, _mm512_sub_ps(wv, _mm512_mul_ps(_mm512_set1_ps(lr), u)));
    _mm512_storeu_ps(consumed + i, _mm512_setzero_ps());
  }
  for (; i < end; ++i) {
    float u = scalar_direction(a, g[i], m[i], v[i], w[i]);
    if (a.adamw_decay != 0.0f) u = u + a.adamw_decay * w[i];
    w[i] -= lr * u;
    consumed[i] = 0.0f;
  }
}

/// copy[i] = bf16 of w[i] (round to nearest even), the GEMMs' compute copy.
__attribute__((target("avx512f"))) void write_compute_copy(const float* w, std::uint16_t* copy,
                                                           std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) copy[i] = detail::bf16_bits_inline(w[i]);
}

/// Runs `update(begin, end)` over [begin, end) in cache-sized blocks, each
/// followed by its part of the compute copy (when there is one) while the
/// new weights are still in cache.
template <class Update>
void in_blocks(std::int64_t begin, std::int64_t end, const float* w, std::uint16_t* copy,
               Update&& update) {
  constexpr std::int64_t kBlock = 4096;
  for (std::int64_t first = begin; first < end; first += kBlock) {
    const std::int64_t last = std::min(end, first + kBlock);
    update(first, last);
    if (copy) write_compute_copy(w, copy, first, last);
  }
}

__attribute__((target("avx512f"))) double sum_squares(const float* x, std::int64_t begin,
                                                      std::int64_t end) {
  __m512d lanes = _mm512_setzero_pd();
  std::int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m512d d = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    lanes = _mm512_add_pd(lanes, _mm512_mul_pd(d, d));
  }
  double sum = _mm512_reduce_add_pd(lanes);
  for (; i < end; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

class OmpAdamUpdate final : public Kernel {
 public:
  explicit OmpAdamUpdate(const KernelDesc& desc)
      : count_(element_count(desc.input_shapes.at(0))),
        lamb_(desc.op == OpKind::lamb_update),
        attrs_(desc.attrs_as<OptimizerUpdateAttrs>()),
        parallel_(omp_parallel_for()) {}

  /// in: w, g, m, v, step -> out: w, m, v, g (zeroed once read) [, the
  /// weights' bf16 compute copy, written from the updated weights].
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    update(in, out);
    if (out.size() > 4 && out[4].dtype == DType::f32)  // a copy at f32: the weights themselves
      std::memcpy(out[4].buffer->data(), out[0].buffer->data(), out[0].bytes());
  }

  std::string implementation() const override {
    return std::string("openmp ") + (lamb_ ? "lamb_update" : "adamw_update") + " avx512";
  }

 private:
  void update(std::span<const Tensor> in, std::span<const Tensor> out) {
    std::uint16_t* copy =
        out.size() > 4 && out[4].dtype == DType::bf16 ? out[4].data<std::uint16_t>() : nullptr;
    float *w = out[0].data<float>(), *m = out[1].data<float>(), *v = out[2].data<float>();
    const float* g = in[1].data<float>();
    float* consumed = out[3].data<float>();
    const OptimizerStep now = read_optimizer_step(in[4]);
    const auto& h = attrs_.hyper;
    const float decay = attrs_.decay ? static_cast<float>(h.weight_decay) : 0.0f;
    // Bias corrections in double from the f32 betas, as the reference.
    const auto beta1 = static_cast<float>(h.beta1), beta2 = static_cast<float>(h.beta2);
    const auto step = static_cast<double>(now.step);
    const AdamScalars a{beta1,
                        beta2,
                        static_cast<float>(now.grad_scale),
                        static_cast<float>(1.0 / (1.0 - std::pow(beta1, step))),
                        static_cast<float>(1.0 / (1.0 - std::pow(beta2, step))),
                        static_cast<float>(h.epsilon),
                        lamb_ ? decay : 0.0f,
                        lamb_ ? 0.0f : decay};
    const auto lr = static_cast<float>(now.learning_rate);
    if (lamb_ && attrs_.trust_ratio) {
      const auto norms = deterministic_sums<2>(
          parallel_, count_, kSumGrain, [&](std::int64_t begin, std::int64_t end) {
            return moments_and_norms(a, g, m, v, w, begin, end);
          });
      double ratio = 1.0;
      if (norms[0] > 0 && norms[1] > 0) ratio = std::sqrt(norms[0]) / std::sqrt(norms[1]);
      const auto rate = static_cast<float>(lr * ratio);
      parallel_(count_, [&](std::int64_t begin, std::int64_t end) {
        in_blocks(begin, end, w, copy, [&](std::int64_t first, std::int64_t last) {
          apply_direction(a, m, v, w, consumed, rate, first, last);
        });
      });
      return;
    }
    parallel_(count_, [&](std::int64_t begin, std::int64_t end) {
      in_blocks(begin, end, w, copy, [&](std::int64_t first, std::int64_t last) {
        update_in_one_pass(a, g, m, v, w, consumed, lr, first, last);
      });
    });
  }

  std::int64_t count_;
  bool lamb_;
  OptimizerUpdateAttrs attrs_;
  ParallelFor parallel_;
};

class OmpSumOfSquares final : public Kernel {
 public:
  explicit OmpSumOfSquares(const KernelDesc& desc)
      : count_(element_count(desc.input_shapes.at(0))), parallel_(omp_parallel_for()) {}

  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    const float* x = in[0].data<float>();
    out[0].data<float>()[0] = static_cast<float>(deterministic_sum(
        parallel_, count_, kSumGrain,
        [&](std::int64_t begin, std::int64_t end) { return sum_squares(x, begin, end); }));
  }
  std::string implementation() const override { return "openmp sum_of_squares avx512"; }

 private:
  std::int64_t count_;
  ParallelFor parallel_;
};

}  // namespace

std::unique_ptr<Kernel> make_omp_adam_update(const KernelDesc& desc) {
  return std::make_unique<OmpAdamUpdate>(desc);
}

std::unique_ptr<Kernel> make_omp_sum_of_squares(const KernelDesc& desc) {
  return std::make_unique<OmpSumOfSquares>(desc);
}

}  // namespace polyhal::cpu
