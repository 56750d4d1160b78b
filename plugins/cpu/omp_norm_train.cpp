#include "omp_norm_train.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "omp_convert.hpp"
#include "polyhal/dtype.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

/// Runs `body(T{})` with T the storage type of `tensor`: float, or the
/// bf16 bits (std::uint16_t).
template <class Body>
void with_storage(const Tensor& tensor, Body&& body) {
  if (tensor.dtype == DType::bf16) {
    body(std::uint16_t{});
  } else {
    body(float{});
  }
}

class OmpAdd final : public Kernel {
 public:
  explicit OmpAdd(const KernelDesc& desc)
      : desc_(desc), types_(operand_types(desc)), count_(element_count(desc.input_shapes.at(0))) {}
  /// in: A, B -> A + B, all stored at round_to.
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    with_storage(in[0], [&]<class T>(T) {
      const T *a = in[0].data<T>(), *b = in[1].data<T>();
      T* y = out[0].data<T>();
#pragma omp parallel for simd schedule(static)
      for (std::int64_t i = 0; i < count_; ++i) store_f32(y, i, load_f32(a, i) + load_f32(b, i));
    });
  }
  std::string implementation() const override {
    return "omp add";
  }
  double flops() const override {
    return static_cast<double>(count_);
  }

 private:
  KernelDesc desc_;
  OperandTypes types_;
  std::int64_t count_;
};

class OmpLayerNormTrain final : public Kernel {
 public:
  explicit OmpLayerNormTrain(const KernelDesc& desc)
      : desc_(desc),
        types_(operand_types(desc)),
        m_(desc.input_shapes.at(0).at(0)),
        h_(desc.input_shapes.at(0).at(1)),
        eps_(desc.attrs_as<LayerNormAttrs>().eps) {}
  /// in: X (stored at round_to), gamma, beta -> Y (stored at round_to), mean, rstd (f32).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    with_storage(in[0], [&]<class T>(T) { run_on<T>(in, out); });
  }
  std::string implementation() const override { return "omp layernorm_train"; }
  double flops() const override { return 8.0 * static_cast<double>(m_ * h_); }

 private:
  template <class T>
  void run_on(std::span<const Tensor> in, std::span<const Tensor> out) const {
    const T* x = in[0].data<T>();
    const float *gamma = in[1].data<float>(), *beta = in[2].data<float>();
    T* y = out[0].data<T>();
    float *mean_out = out[1].data<float>(), *rstd_out = out[2].data<float>();
    const std::int64_t h = h_;
    const double eps = eps_;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < m_; ++i) {
      const T* row = x + i * h;
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t j = 0; j < h; ++j) sum += load_f32(row, j);
      const float mean = sum / static_cast<float>(h);
      float squares = 0;  // two passes: no cancellation from E[x^2] - E[x]^2
#pragma omp simd reduction(+ : squares)
      for (std::int64_t j = 0; j < h; ++j)
        squares += (load_f32(row, j) - mean) * (load_f32(row, j) - mean);
      const auto rstd = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(h) + eps));
      T* yr = y + i * h;
#pragma omp simd
      for (std::int64_t j = 0; j < h; ++j)
        store_f32(yr, j, (load_f32(row, j) - mean) * rstd * gamma[j] + beta[j]);
      mean_out[i] = mean;
      rstd_out[i] = rstd;
    }
  }

  KernelDesc desc_;
  OperandTypes types_;
  std::int64_t m_, h_;
  double eps_;
};

class OmpLayerNormBackward final : public Kernel {
 public:
  explicit OmpLayerNormBackward(const KernelDesc& desc)
      : desc_(desc),
        types_(operand_types(desc)),
        m_(desc.input_shapes.at(0).at(0)),
        h_(desc.input_shapes.at(0).at(1)),
        low_(round_type(desc)),
        blocks_((m_ + kRowsPerBlock - 1) / kRowsPerBlock),
        partial_(static_cast<std::size_t>(blocks_ * 2 * h_)) {}

  /// in: dY, X (stored at round_to), gamma, mean, rstd (f32) -> dX (stored
  /// at round_to), dgamma +=, dbeta += (f32; this call's contribution
  /// rounded to round_to before it is added, as the reference).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    with_storage(in[0], [&]<class T>(T) { run_on<T>(in, out); });
  }
  std::string implementation() const override { return "omp layernorm_backward"; }
  double flops() const override { return 12.0 * static_cast<double>(m_ * h_); }

 private:
  template <class T>
  void run_on(std::span<const Tensor> in, std::span<const Tensor> out) {
    const T *dy = in[0].data<T>(), *x = in[1].data<T>();
    const float *gamma = in[2].data<float>(), *mean = in[3].data<float>(),
                *rstd = in[4].data<float>();
    T* dx = out[0].data<T>();
    float *dgamma = out[1].data<float>(), *dbeta = out[2].data<float>();
    const std::int64_t h = h_, m = m_;
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
        const T *dyr = dy + i * h, *xr = x + i * h;
        const float mu = mean[i], r = rstd[i];
        float sum_g = 0, sum_gx = 0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (std::int64_t j = 0; j < h; ++j) {
          const float xhat = (load_f32(xr, j) - mu) * r;
          const float g = load_f32(dyr, j) * gamma[j];
          sum_g += g;
          sum_gx += g * xhat;
          pg[j] += load_f32(dyr, j) * xhat;
          pb[j] += load_f32(dyr, j);
        }
        T* dxr = dx + i * h;
#pragma omp simd
        for (std::int64_t j = 0; j < h; ++j) {
          const float xhat = (load_f32(xr, j) - mu) * r;
          store_f32(dxr, j,
                    r * (load_f32(dyr, j) * gamma[j] - inv_h * sum_g - xhat * inv_h * sum_gx));
        }
      }
    }
    const DType low = low_;
#pragma omp parallel for schedule(static)
    for (std::int64_t j = 0; j < h; ++j) {
      float g = 0, b = 0;
      for (std::int64_t block = 0; block < blocks_; ++block) {
        g += partial[block * 2 * h + j];
        b += partial[block * 2 * h + h + j];
      }
      dgamma[j] += low == DType::f32 ? g : round_through(low, g);
      dbeta[j] += low == DType::f32 ? b : round_through(low, b);
    }
  }

  static constexpr std::int64_t kRowsPerBlock = 32;
  KernelDesc desc_;
  OperandTypes types_;
  std::int64_t m_, h_;
  DType low_;
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
