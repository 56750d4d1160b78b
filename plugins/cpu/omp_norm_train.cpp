#include "omp_norm_train.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "polyhal/dtype.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

inline float held(bool bf16, float v) {
  return bf16 ? detail::round_bf16_inline(v) : v;
}

class OmpAdd final : public Kernel {
 public:
  explicit OmpAdd(const KernelDesc& desc)
      : count_(element_count(desc.input_shapes.at(0))), bf16_(round_type(desc) == DType::bf16) {}
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    const float *a = in[0].data<float>(), *b = in[1].data<float>();
    float* y = out[0].data<float>();
    const bool bf16 = bf16_;
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < count_; ++i) y[i] = held(bf16, a[i] + b[i]);
  }
  std::string implementation() const override {
    return "omp add";
  }
  double flops() const override {
    return static_cast<double>(count_);
  }

 private:
  std::int64_t count_;
  bool bf16_;
};

class OmpLayerNormTrain final : public Kernel {
 public:
  explicit OmpLayerNormTrain(const KernelDesc& desc)
      : m_(desc.input_shapes.at(0).at(0)),
        h_(desc.input_shapes.at(0).at(1)),
        eps_(desc.attrs_as<LayerNormAttrs>().eps),
        bf16_(round_type(desc) == DType::bf16) {}
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    const float *x = in[0].data<float>(), *gamma = in[1].data<float>(), *beta = in[2].data<float>();
    float *y = out[0].data<float>(), *mean_out = out[1].data<float>(),
          *rstd_out = out[2].data<float>();
    const std::int64_t h = h_;
    const bool bf16 = bf16_;
    const double eps = eps_;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < m_; ++i) {
      const float* row = x + i * h;
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t j = 0; j < h; ++j) sum += row[j];
      const float mean = sum / static_cast<float>(h);
      float squares = 0;  // two passes: no cancellation from E[x^2] - E[x]^2
#pragma omp simd reduction(+ : squares)
      for (std::int64_t j = 0; j < h; ++j) squares += (row[j] - mean) * (row[j] - mean);
      const auto rstd = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(h) + eps));
      float* yr = y + i * h;
#pragma omp simd
      for (std::int64_t j = 0; j < h; ++j)
        yr[j] = held(bf16, (row[j] - mean) * rstd * gamma[j] + beta[j]);
      mean_out[i] = mean;
      rstd_out[i] = rstd;
    }
  }
  std::string implementation() const override {
    return "omp layernorm_train";
  }
  double flops() const override {
    return 8.0 * static_cast<double>(m_ * h_);
  }

 private:
  std::int64_t m_, h_;
  double eps_;
  bool bf16_;
};

class OmpLayerNormBackward final : public Kernel {
 public:
  explicit OmpLayerNormBackward(const KernelDesc& desc)
      : m_(desc.input_shapes.at(0).at(0)),
        h_(desc.input_shapes.at(0).at(1)),
        bf16_(round_type(desc) == DType::bf16),
        blocks_((m_ + kRowsPerBlock - 1) / kRowsPerBlock),
        partial_(static_cast<std::size_t>(blocks_ * 2 * h_)) {}

  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    const float *dy = in[0].data<float>(), *x = in[1].data<float>(), *gamma = in[2].data<float>(),
                *mean = in[3].data<float>(), *rstd = in[4].data<float>();
    float *dx = out[0].data<float>(), *dgamma = out[1].data<float>(), *dbeta = out[2].data<float>();
    const std::int64_t h = h_, m = m_;
    const bool bf16 = bf16_;
    const float inv_h = 1.0f / static_cast<float>(h);
    float* partial = partial_.data();
    // Row blocks of a fixed size, so the parameter gradients (summed block by
    // block in order below) do not depend on the number of threads.
#pragma omp parallel for schedule(static)
    for (std::int64_t block = 0; block < blocks_; ++block) {
      float* pg = partial + block * 2 * h;
      float* pb = pg + h;
      std::fill(pg, pg + 2 * h, 0.0f);
      const std::int64_t last = std::min(m, (block + 1) * kRowsPerBlock);
      for (std::int64_t i = block * kRowsPerBlock; i < last; ++i) {
        const float *dyr = dy + i * h, *xr = x + i * h;
        const float mu = mean[i], r = rstd[i];
        float sum_g = 0, sum_gx = 0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (std::int64_t j = 0; j < h; ++j) {
          const float xhat = (xr[j] - mu) * r;
          const float g = dyr[j] * gamma[j];
          sum_g += g;
          sum_gx += g * xhat;
          pg[j] += dyr[j] * xhat;
          pb[j] += dyr[j];
        }
        float* dxr = dx + i * h;
#pragma omp simd
        for (std::int64_t j = 0; j < h; ++j) {
          const float xhat = (xr[j] - mu) * r;
          dxr[j] = held(bf16, r * (dyr[j] * gamma[j] - inv_h * sum_g - xhat * inv_h * sum_gx));
        }
      }
    }
#pragma omp parallel for simd schedule(static)
    for (std::int64_t j = 0; j < h; ++j) {
      float g = 0, b = 0;
      for (std::int64_t block = 0; block < blocks_; ++block) {
        g += partial[block * 2 * h + j];
        b += partial[block * 2 * h + h + j];
      }
      dgamma[j] += g;
      dbeta[j] += b;
    }
  }
  std::string implementation() const override {
    return "omp layernorm_backward";
  }
  double flops() const override {
    return 12.0 * static_cast<double>(m_ * h_);
  }

 private:
  static constexpr std::int64_t kRowsPerBlock = 32;
  std::int64_t m_, h_;
  bool bf16_;
  std::int64_t blocks_;
  std::vector<float> partial_;  // per block: dgamma part [h], dbeta part [h]
};

void refuse_f16(const KernelDesc& desc) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
}

}  // namespace

std::unique_ptr<Kernel> make_omp_layernorm_train(const KernelDesc& desc) {
  refuse_f16(desc);
  return std::make_unique<OmpLayerNormTrain>(desc);
}
std::unique_ptr<Kernel> make_omp_layernorm_backward(const KernelDesc& desc) {
  refuse_f16(desc);
  return std::make_unique<OmpLayerNormBackward>(desc);
}
std::unique_ptr<Kernel> make_omp_add(const KernelDesc& desc) {
  refuse_f16(desc);
  return std::make_unique<OmpAdd>(desc);
}

}  // namespace polyhal::cpu
