// Training GEMMs on the CPU through oneDNN (train_kernels.hpp "dense" and
// "dense_backward"): weights are run inputs that change every step, so they
// are read in place (no packing). With round_to=bf16 the activations and the
// weights' compute copy are bf16 tensors (operand_types) that oneDNN reads
// as they are, accumulating in f32; bf16 outputs are written by oneDNN
// (round to nearest even, as the reference), the weight gradients
// accumulate in f32. With products=bf16 (bf32) the tensors stay f32 and the
// GEMM operands are rounded into bf16 scratch before each run (what
// oneDNN's fpmath_mode bf16 does inside; 2.6 ignores that mode without
// AMX), the results written in f32.
#include <fmt/format.h>
#include <omp.h>

#include <bit>
#include <type_traits>
#include <vector>

#include "onednn_api.hpp"
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

/// The type a GEMM reads its operands in: bf16 for bf32's products of f32
/// tensors, else their storage type.
dnnl::memory::data_type product_type(const KernelDesc& desc) {
  return operand_type(desc.products == DType::bf16 ? DType::bf16 : desc.round_to);
}

/// bf32's bf16 scratch of an f32 operand (empty otherwise: the operand is
/// read as stored).
Operand product_scratch(const KernelDesc& desc, std::int64_t count) {
  return Operand(desc.products == DType::bf16 ? DType::bf16 : DType::f32, count);
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
        x_(product_scratch(desc, m_ * k_)),
        w_(product_scratch(desc, k_ * n_)),
        gemm_(engine, {{m_, k_}, product_type(desc), tag::ab},
              {{k_, n_}, product_type(desc), tag::ba},
              {{m_, n_}, operand_type(desc.round_to), tag::ab}, false, true) {}

  /// in: X, W (stored at round_to), b (f32) -> Y (stored at round_to).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    const bool narrowed = desc_.products == DType::bf16;
    gemm_.run(stream_, narrowed ? x_.of(in[0].data<float>()) : in[0].buffer->data(),
              narrowed ? w_.of(in[1].data<float>()) : in[1].buffer->data(), out[0].buffer->data(),
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
  Operand x_, w_;
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
        dy_(product_scratch(desc, m_ * n_)),
        x_(product_scratch(desc, m_ * k_)),
        w_(product_scratch(desc, n_ * k_)),
        // dX[M,K] = dY[M,N] W[N,K]
        data_(engine, {{m_, n_}, product_type(desc), tag::ab},
              {{n_, k_}, product_type(desc), tag::ab},
              {{m_, k_}, operand_type(desc.round_to), tag::ab}, false),
        // dW[N,K] += dY^T[N,M] X[M,K]: dY read transposed in place
        weights_(engine, {{n_, m_}, product_type(desc), tag::ba},
                 {{m_, k_}, product_type(desc), tag::ab}, {{n_, k_}, dt::f32, tag::ab}, true) {}

  /// in: dY, X, W (stored at round_to) -> dX (stored at round_to), dW +=, db += (f32).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    const bool narrowed = desc_.products == DType::bf16;
    const void* dy = narrowed ? dy_.of(in[0].data<float>()) : in[0].buffer->data();
    data_.run(stream_, dy, narrowed ? w_.of(in[2].data<float>()) : in[2].buffer->data(),
              out[0].buffer->data());
    weights_.run(stream_, dy, narrowed ? x_.of(in[1].data<float>()) : in[1].buffer->data(),
                 out[1].data<float>());
    stream_.wait();
    dy = in[0].buffer->data();  // the bias gradient sums dY as stored
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
  Operand dy_, x_, w_;
  Gemm data_, weights_;
};

/// The grouped dense's dimensions (train_kernels.hpp "grouped_dense"): X[M,K],
/// W[N,K/G], G groups of K/G inputs and N/G outputs.
struct GroupedShape {
  std::int64_t m, k, n, groups, k_group, n_group;
  GroupedShape(const KernelDesc& desc, std::size_t x, std::size_t w)
      : m(desc.input_shapes.at(x).at(0)),
        k(desc.input_shapes.at(x).at(1)),
        n(desc.input_shapes.at(w).at(0)),
        groups(desc.attrs_as<GroupedDenseAttrs>().groups),
        k_group(desc.input_shapes.at(w).at(1)),
        n_group(groups > 0 ? n / groups : 0) {
    if (groups <= 0 || n % groups != 0 || k_group * groups != k)
      throw KernelNotFoundError(fmt::format("cpu {}: W[{},{}] is not X's {} columns in {} groups",
                                            op_name(desc.op), n, k_group, k, groups));
  }
};

using Dims = dnnl::memory::dims;

/// A plain strided matrix view for one group's GEMM.
dnnl::memory::desc view(std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                        std::int64_t col_stride, dnnl::memory::data_type type) {
  return onednn::strided(Dims{rows, cols}, type, Dims{row_stride, col_stride});
}

/// One strided 2-D GEMM run once per group on offset pointers (every group
/// has the same shapes and strides): G small GEMMs, no copies.
const char* at(const Tensor& t, std::int64_t elements) {
  return static_cast<const char*>(t.buffer->data()) +
         elements * static_cast<std::int64_t>(dtype_size(t.dtype));
}
char* at_mut(const Tensor& t, std::int64_t elements) {
  return const_cast<char*>(at(t, elements));
}

class OneDnnGroupedDense final : public Kernel {
 public:
  OneDnnGroupedDense(const KernelDesc& desc, const dnnl::engine& engine)
      : desc_(desc),
        types_(operand_types(desc)),
        stream_(engine),
        s_(desc, 0, 1),
        // Y_g[M, N/G] = X_g[M, K/G] W_g^T + b_g
        gemm_(engine, view(s_.m, s_.k_group, s_.k, 1, operand_type(desc.round_to)),
              view(s_.k_group, s_.n_group, 1, s_.k_group, operand_type(desc.round_to)),
              view(s_.m, s_.n_group, s_.n, 1, operand_type(desc.round_to)), false, true) {}

  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    for (std::int64_t g = 0; g < s_.groups; ++g)
      gemm_.run(stream_, at(in[0], g * s_.k_group), at(in[1], g * s_.n_group * s_.k_group),
                at_mut(out[0], g * s_.n_group), in[2].data<float>() + g * s_.n_group);
    stream_.wait();
  }
  std::string implementation() const override {
    return "onednn grouped_dense " + std::string(gemm_.pd.impl_info_str());
  }
  double flops() const override { return 2.0 * static_cast<double>(s_.m * s_.n * s_.k_group); }

 private:
  KernelDesc desc_;
  OperandTypes types_;
  dnnl::stream stream_;
  GroupedShape s_;
  Gemm gemm_;
};

class OneDnnGroupedDenseBackward final : public Kernel {
 public:
  OneDnnGroupedDenseBackward(const KernelDesc& desc, const dnnl::engine& engine)
      : desc_(desc),
        types_(operand_types(desc)),
        stream_(engine),
        s_(desc, 1, 2),
        // dX_g[M, K/G] = dY_g[M, N/G] W_g[N/G, K/G]
        data_(engine, view(s_.m, s_.n_group, s_.n, 1, operand_type(desc.round_to)),
              view(s_.n_group, s_.k_group, s_.k_group, 1, operand_type(desc.round_to)),
              view(s_.m, s_.k_group, s_.k, 1, operand_type(desc.round_to)), false),
        // dW_g[N/G, K/G] += dY_g^T X_g
        weights_(engine, view(s_.n_group, s_.m, 1, s_.n, operand_type(desc.round_to)),
                 view(s_.m, s_.k_group, s_.k, 1, operand_type(desc.round_to)),
                 view(s_.n_group, s_.k_group, s_.k_group, 1, dt::f32), true) {}

  /// in: dY, X, W (stored at round_to) -> dX (at round_to), dW +=, db += (f32).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    for (std::int64_t g = 0; g < s_.groups; ++g) {
      data_.run(stream_, at(in[0], g * s_.n_group), at(in[2], g * s_.n_group * s_.k_group),
                at_mut(out[0], g * s_.k_group));
      weights_.run(stream_, at(in[0], g * s_.n_group), at(in[1], g * s_.k_group),
                   out[1].data<float>() + g * s_.n_group * s_.k_group);
    }
    stream_.wait();
    const void* dy = in[0].buffer->data();
    if (in[0].dtype == DType::bf16) {
      add_column_sums(static_cast<const std::uint16_t*>(dy), s_.m, s_.n, out[2].data<float>());
    } else {
      add_column_sums(static_cast<const float*>(dy), s_.m, s_.n, out[2].data<float>());
    }
  }
  std::string implementation() const override {
    return "onednn grouped_dense_backward " + std::string(data_.pd.impl_info_str());
  }
  double flops() const override { return 4.0 * static_cast<double>(s_.m * s_.n * s_.k_group); }

 private:
  KernelDesc desc_;
  OperandTypes types_;
  dnnl::stream stream_;
  GroupedShape s_;
  Gemm data_, weights_;
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_grouped_dense(const KernelDesc& desc,
                                                  const dnnl::engine& engine) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OneDnnGroupedDense>(desc, engine);
}

std::unique_ptr<Kernel> make_onednn_grouped_dense_backward(const KernelDesc& desc,
                                                           const dnnl::engine& engine) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OneDnnGroupedDenseBackward>(desc, engine);
}

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
