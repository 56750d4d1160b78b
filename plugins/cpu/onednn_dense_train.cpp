// Training GEMMs on the CPU through oneDNN (train_kernels.hpp "dense" and
// "dense_backward"): weights are run inputs that change every step, so they
// are read in place (no packing). With round_to=bf16 the activations and the
// weights' compute copy are bf16 tensors (operand_types) that oneDNN reads
// as they are, accumulating in f32; bf16 outputs are written by oneDNN
// (round to nearest even, as the reference), the weight gradients
// accumulate in f32.
#include <fmt/format.h>
#include <omp.h>

#include <bit>
#include <type_traits>
#include <vector>

#include "onednn_gemm.hpp"
#include "onednn_matmul.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

/// db[j] += sum over rows of dy[i, j] (dy f32 or bf16 bits): each thread
/// owns a range of columns and walks the rows in order (contiguous reads, a
/// fixed summation order).
template <class T>
void add_column_sums(const T* dy, std::int64_t rows, std::int64_t cols, float* db) {
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t first = cols * t / threads, last = cols * (t + 1) / threads;
    std::vector<double> sums(static_cast<std::size_t>(last - first));
    for (std::int64_t i = 0; i < rows; ++i) {
      const T* row = dy + i * cols;
      for (std::int64_t j = first; j < last; ++j) {
        if constexpr (std::is_same_v<T, float>) {
          sums[static_cast<std::size_t>(j - first)] += row[j];
        } else {
          sums[static_cast<std::size_t>(j - first)] +=
              std::bit_cast<float>(static_cast<std::uint32_t>(row[j]) << 16);
        }
      }
    }
    for (std::int64_t j = first; j < last; ++j)
      db[j] += static_cast<float>(sums[static_cast<std::size_t>(j - first)]);
  }
}

class OneDnnDense final : public Kernel {
 public:
  OneDnnDense(const KernelDesc& desc, const dnnl::engine& engine)
      : desc_(desc),
        types_(operand_types(desc)),
        stream_(engine),
        m_(desc.input_shapes.at(0).at(0)),
        k_(desc.input_shapes.at(0).at(1)),
        n_(desc.input_shapes.at(1).at(0)),
        gemm_(engine, {{m_, k_}, operand_type(desc.round_to), tag::ab},
              {{k_, n_}, operand_type(desc.round_to), tag::ba},
              {{m_, n_}, operand_type(desc.round_to), tag::ab}, false, true) {}

  /// in: X, W (stored at round_to), b (f32) -> Y (stored at round_to).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    gemm_.run(stream_, in[0].buffer->data(), in[1].buffer->data(), out[0].buffer->data(),
              in[2].data<float>());
    stream_.wait();
  }
  std::string implementation() const override {
    return "onednn dense " + std::string(gemm_.pd.impl_info_str());
  }
  double flops() const override { return 2.0 * static_cast<double>(m_ * n_ * k_); }

 private:
  KernelDesc desc_;
  OperandTypes types_;
  dnnl::stream stream_;
  std::int64_t m_, k_, n_;
  Gemm gemm_;
};

class OneDnnDenseBackward final : public Kernel {
 public:
  OneDnnDenseBackward(const KernelDesc& desc, const dnnl::engine& engine)
      : desc_(desc),
        types_(operand_types(desc)),
        stream_(engine),
        m_(desc.input_shapes.at(0).at(0)),
        n_(desc.input_shapes.at(0).at(1)),
        k_(desc.input_shapes.at(1).at(1)),
        // dX[M,K] = dY[M,N] W[N,K]
        data_(engine, {{m_, n_}, operand_type(desc.round_to), tag::ab},
              {{n_, k_}, operand_type(desc.round_to), tag::ab},
              {{m_, k_}, operand_type(desc.round_to), tag::ab}, false),
        // dW[N,K] += dY^T[N,M] X[M,K]: dY read transposed in place
        weights_(engine, {{n_, m_}, operand_type(desc.round_to), tag::ba},
                 {{m_, k_}, operand_type(desc.round_to), tag::ab}, {{n_, k_}, dt::f32, tag::ab},
                 true) {}

  /// in: dY, X, W (stored at round_to) -> dX (stored at round_to), dW +=, db += (f32).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    const void* dy = in[0].buffer->data();
    data_.run(stream_, dy, in[2].buffer->data(), out[0].buffer->data());
    weights_.run(stream_, dy, in[1].buffer->data(), out[1].data<float>());
    stream_.wait();
    if (in[0].dtype == DType::bf16) {
      add_column_sums(static_cast<const std::uint16_t*>(dy), m_, n_, out[2].data<float>());
    } else {
      add_column_sums(static_cast<const float*>(dy), m_, n_, out[2].data<float>());
    }
  }
  std::string implementation() const override {
    return "onednn dense_backward " + std::string(data_.pd.impl_info_str());
  }
  double flops() const override { return 4.0 * static_cast<double>(m_ * n_ * k_); }

 private:
  KernelDesc desc_;
  OperandTypes types_;
  dnnl::stream stream_;
  std::int64_t m_, n_, k_;
  Gemm data_, weights_;
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_dense(const KernelDesc& desc, const dnnl::engine& engine) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OneDnnDense>(desc, engine);
}

std::unique_ptr<Kernel> make_onednn_dense_backward(const KernelDesc& desc,
                                                   const dnnl::engine& engine) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OneDnnDenseBackward>(desc, engine);
}

}  // namespace polyhal::cpu
