// Training GEMMs on the CPU through oneDNN (train_kernels.hpp "dense" and
// "dense_backward"): weights are run inputs that change every step, so they
// are read in place (no packing). With round_to=bf16 the operands are
// converted to bf16 scratch (allocated at prepare) and multiplied with f32
// accumulation, which is what the reference's rounding emulates; outputs are
// held at bf16 like every mixed-precision op.
#include <fmt/format.h>

#include <unordered_map>
#include <vector>

#include "onednn_matmul.hpp"
#include "polyhal/error.hpp"

namespace polyhal::cpu {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

DType round_type(const KernelDesc& desc) {
  return parse_dtype(desc.attr("round_to", "f32")).value_or(DType::f32);
}

void round_in_place(float* values, std::size_t count, DType type) {
  if (type == DType::f32) return;
  for (std::size_t i = 0; i < count; ++i) values[i] = round_through(type, values[i]);
}

/// A matmul primitive over plain row-major buffers given by pointers at run.
struct Gemm {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
  dnnl::memory a, b, c, scratchpad;
  std::unordered_map<int, dnnl::memory> args;

  Gemm(const dnnl::engine& engine, const dnnl::memory::desc& a_md, const dnnl::memory::desc& b_md,
       const dnnl::memory::desc& c_md, bool accumulate) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (accumulate) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);  // C += A B
      attr.set_post_ops(sum);
    }
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
    primitive = dnnl::matmul(pd);
    a = dnnl::memory(a_md, engine, DNNL_MEMORY_NONE);
    b = dnnl::memory(b_md, engine, DNNL_MEMORY_NONE);
    c = dnnl::memory(c_md, engine, DNNL_MEMORY_NONE);
    scratchpad = dnnl::memory(pd.scratchpad_desc(), engine);
    args = {{DNNL_ARG_SRC, a},
            {DNNL_ARG_WEIGHTS, b},
            {DNNL_ARG_DST, c},
            {DNNL_ARG_SCRATCHPAD, scratchpad}};
  }
  void run(dnnl::stream& stream, const void* pa, const void* pb, void* pc) {
    a.set_data_handle(const_cast<void*>(pa));
    b.set_data_handle(const_cast<void*>(pb));
    c.set_data_handle(pc);
    primitive.execute(stream, args);
  }
};

/// Operand storage for the bf16 path: f32 values converted once per run.
struct Bf16Copy {
  std::vector<std::uint16_t> bits;
  const void* of(const float* values, std::size_t count) {
    bits.resize(count);
    convert(values, DType::f32, bits.data(), DType::bf16, count);
    return bits.data();
  }
};

class OneDnnDense final : public Kernel {
 public:
  OneDnnDense(const KernelDesc& desc, const dnnl::engine& engine)
      : stream_(engine),
        type_(round_type(desc)),
        m_(desc.input_shapes.at(0).at(0)),
        k_(desc.input_shapes.at(0).at(1)),
        n_(desc.input_shapes.at(1).at(0)),
        gemm_(engine, {{m_, k_}, op_type(), tag::ab}, {{k_, n_}, op_type(), tag::ba},
              {{m_, n_}, dt::f32, tag::ab}, false) {}

  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    const auto* x = in[0].data<float>();
    const auto* w = in[1].data<float>();
    const auto* b = in[2].data<float>();
    float* y = out[0].data<float>();
    const bool low = type_ == DType::bf16;
    gemm_.run(stream_, low ? x_.of(x, static_cast<std::size_t>(m_ * k_)) : x,
              low ? w_.of(w, static_cast<std::size_t>(n_ * k_)) : w, y);
    stream_.wait();
#pragma omp parallel for
    for (std::int64_t i = 0; i < m_; ++i) {
      for (std::int64_t j = 0; j < n_; ++j) y[i * n_ + j] += b[j];
    }
    round_in_place(y, static_cast<std::size_t>(m_ * n_), type_);
  }
  std::string implementation() const override {
    return "onednn dense " + std::string(gemm_.pd.impl_info_str());
  }
  double flops() const override {
    return 2.0 * static_cast<double>(m_ * n_ * k_);
  }

 private:
  dt op_type() const {
    return type_ == DType::bf16 ? dt::bf16 : dt::f32;
  }
  dnnl::stream stream_;
  DType type_;
  std::int64_t m_, k_, n_;
  Gemm gemm_;
  Bf16Copy x_, w_;
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
        data_(engine, {{m_, n_}, op_type(), tag::ab}, {{n_, k_}, op_type(), tag::ab},
              {{m_, k_}, dt::f32, tag::ab}, false),
        // dW[N,K] += dY^T[N,M] X[M,K]: dY read transposed in place
        weights_(engine, {{n_, m_}, op_type(), tag::ba}, {{m_, k_}, op_type(), tag::ab},
                 {{n_, k_}, dt::f32, tag::ab}, true) {
    if (type_ != DType::f32 && type_ != DType::bf16) {
      throw KernelNotFoundError(fmt::format("cpu dense_backward: no {} path", dtype_name(type_)));
    }
  }

  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    const auto* dy = in[0].data<float>();
    const auto* x = in[1].data<float>();
    const auto* w = in[2].data<float>();
    const bool low = type_ == DType::bf16;
    const void* dy_op = low ? dy_.of(dy, static_cast<std::size_t>(m_ * n_)) : dy;
    data_.run(stream_, dy_op, low ? w_.of(w, static_cast<std::size_t>(n_ * k_)) : w,
              out[0].data<float>());
    weights_.run(stream_, dy_op, low ? x_.of(x, static_cast<std::size_t>(m_ * k_)) : x,
                 out[1].data<float>());
    stream_.wait();
    float* db = out[2].data<float>();
#pragma omp parallel for
    for (std::int64_t j = 0; j < n_; ++j) {
      double sum = 0;
      for (std::int64_t i = 0; i < m_; ++i) sum += dy[i * n_ + j];
      db[j] += static_cast<float>(sum);
    }
    round_in_place(out[0].data<float>(), static_cast<std::size_t>(m_ * k_), type_);
  }
  std::string implementation() const override {
    return "onednn dense_backward " + std::string(data_.pd.impl_info_str());
  }
  double flops() const override {
    return 4.0 * static_cast<double>(m_ * n_ * k_);
  }

 private:
  dt op_type() const {
    return type_ == DType::bf16 ? dt::bf16 : dt::f32;
  }
  dnnl::stream stream_;
  DType type_;
  std::int64_t m_, n_, k_;
  Gemm data_, weights_;
  Bf16Copy dy_, w_, x_;
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
