// Training GEMMs on the CPU through oneDNN (train_kernels.hpp "dense" and
// "dense_backward"): weights are run inputs that change every step, so they
// are read in place (no packing). With round_to=bf16 the operands are
// narrowed into bf16 scratch (allocated at prepare, filled on the OpenMP
// pool) and multiplied with f32 accumulation, which is what the reference's
// rounding emulates; outputs are held at bf16 like every mixed-precision op.
#include <fmt/format.h>
#include <omp.h>

#include <vector>

#include "omp_convert.hpp"
#include "onednn_gemm.hpp"
#include "onednn_matmul.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

/// db[j] += sum over rows of dy[i, j]: each thread owns a range of columns
/// and walks the rows in order (contiguous reads, a fixed summation order).
void add_column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db) {
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t first = cols * t / threads, last = cols * (t + 1) / threads;
    std::vector<double> sums(static_cast<std::size_t>(last - first));
    for (std::int64_t i = 0; i < rows; ++i) {
      const float* row = dy + i * cols;
      for (std::int64_t j = first; j < last; ++j)
        sums[static_cast<std::size_t>(j - first)] += row[j];
    }
    for (std::int64_t j = first; j < last; ++j)
      db[j] += static_cast<float>(sums[static_cast<std::size_t>(j - first)]);
  }
}

class OneDnnDense final : public Kernel {
 public:
  OneDnnDense(const KernelDesc& desc, const dnnl::engine& engine)
      : stream_(engine),
        type_(round_type(desc)),
        m_(desc.input_shapes.at(0).at(0)),
        k_(desc.input_shapes.at(0).at(1)),
        n_(desc.input_shapes.at(1).at(0)),
        gemm_(engine, {{m_, k_}, operand_type(type_), tag::ab},
              {{k_, n_}, operand_type(type_), tag::ba}, {{m_, n_}, dt::f32, tag::ab}, false, true),
        x_(type_, m_ * k_),
        w_(type_, n_ * k_) {}

  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    float* y = out[0].data<float>();
    gemm_.run(stream_, x_.of(in[0].data<float>()), w_.of(in[1].data<float>()), y,
              in[2].data<float>());
    stream_.wait();
    if (type_ == DType::bf16) round_to_bf16(y, m_ * n_);
  }
  std::string implementation() const override {
    return "onednn dense " + std::string(gemm_.pd.impl_info_str());
  }
  double flops() const override { return 2.0 * static_cast<double>(m_ * n_ * k_); }

 private:
  dnnl::stream stream_;
  DType type_;
  std::int64_t m_, k_, n_;
  Gemm gemm_;
  Operand x_, w_;
};

class OneDnnDenseBackward final : public Kernel {
 public:
  OneDnnDenseBackward(const KernelDesc& desc, const dnnl::engine& engine)
      : stream_(engine),
        type_(round_type(desc)),
        m_(desc.input_shapes.at(0).at(0)),
        n_(desc.input_shapes.at(0).at(1)),
        k_(desc.input_shapes.at(1).at(1)),
        // dX[M,K] = dY[M,N] W[N,K]
        data_(engine, {{m_, n_}, operand_type(type_), tag::ab},
              {{n_, k_}, operand_type(type_), tag::ab}, {{m_, k_}, dt::f32, tag::ab}, false),
        // dW[N,K] += dY^T[N,M] X[M,K]: dY read transposed in place
        weights_(engine, {{n_, m_}, operand_type(type_), tag::ba},
                 {{m_, k_}, operand_type(type_), tag::ab}, {{n_, k_}, dt::f32, tag::ab}, true),
        dy_(type_, m_ * n_),
        w_(type_, n_ * k_),
        x_(type_, m_ * k_) {
    if (type_ != DType::f32 && type_ != DType::bf16) {
      throw KernelNotFoundError(fmt::format("cpu dense_backward: no {} path", dtype_name(type_)));
    }
  }

  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    const auto* dy = in[0].data<float>();
    const void* dy_op = dy_.of(dy);
    data_.run(stream_, dy_op, w_.of(in[2].data<float>()), out[0].data<float>());
    weights_.run(stream_, dy_op, x_.of(in[1].data<float>()), out[1].data<float>());
    stream_.wait();
    add_column_sums(dy, m_, n_, out[2].data<float>());
    if (type_ == DType::bf16) round_to_bf16(out[0].data<float>(), m_ * k_);
  }
  std::string implementation() const override {
    return "onednn dense_backward " + std::string(data_.pd.impl_info_str());
  }
  double flops() const override { return 4.0 * static_cast<double>(m_ * n_ * k_); }

 private:
  dnnl::stream stream_;
  DType type_;
  std::int64_t m_, n_, k_;
  Gemm data_, weights_;
  Operand dy_, w_, x_;
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_dense(const KernelDesc& desc, const dnnl::engine& engine) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OneDnnDense>(desc, engine);
}

std::unique_ptr<Kernel> make_onednn_dense_backward(const KernelDesc& desc,
                                                   const dnnl::engine& engine) {
  return std::make_unique<OneDnnDenseBackward>(desc, engine);
}

}  // namespace polyhal::cpu
