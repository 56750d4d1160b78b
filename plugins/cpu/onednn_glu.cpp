// GroupBERT's gated linear unit on the CPU (train_kernels.hpp "glu",
// "glu_backward"): Y = values * sigmoid(gates) over A = [values | gates]
// [M, 2N], through oneDNN's JIT reorder, eltwise and binary primitives on
// dense f32 scratch (the halves of A are strided views that oneDNN's JIT
// eltwise and binary would not take). The math is f32 and each output is
// rounded once to its storage (bf16 with round_to=bf16), as the reference.
#include <fmt/format.h>

#include <vector>

#include "onednn_api.hpp"
#include "onednn_gemm.hpp"
#include "onednn_matmul.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using Dims = dnnl::memory::dims;

class OneDnnGlu final : public Kernel {
 public:
  OneDnnGlu(const KernelDesc& desc, const dnnl::engine& engine)
      : desc_(desc),
        types_(operand_types(desc)),
        engine_(engine),
        stream_(engine),
        backward_(desc.op == OpKind::glu_backward) {
    const Shape& a = desc.input_shapes.at(backward_ ? 1 : 0);
    if (a.size() != 2 || a[1] % 2 != 0)
      throw KernelNotFoundError(
          fmt::format("cpu {}: the input is not [M, 2N] (values, then gates)", op_name(desc.op)));
    m_ = a[0];
    n_ = a[1] / 2;
    const dt type = operand_type(desc.round_to);
    half_ = dnnl::memory::desc(Dims{m_, n_}, type, Dims{2 * n_, 1});  // a half of A or dA
    dense_ = dnnl::memory::desc(Dims{m_, n_}, type, tag::ab);         // Y or dY
    f32_ = dnnl::memory::desc(Dims{m_, n_}, dt::f32, tag::ab);
    const auto count = static_cast<std::size_t>(m_ * n_);
    create_or_refuse(desc, [&] {
      widen_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, half_, engine, f32_));
      const dnnl::eltwise_forward::primitive_desc sigmoid =
          onednn::eltwise(engine, dnnl::prop_kind::forward_training,
                          dnnl::algorithm::eltwise_logistic_use_dst_for_bwd, f32_);
      sigmoid_ = dnnl::eltwise_forward(sigmoid);
      // All f32: oneDNN 2.6's binary runs mixed types on its reference code.
      multiply_pd_ = onednn::binary(engine, dnnl::algorithm::binary_mul, f32_, f32_, f32_);
      multiply_ = dnnl::binary(multiply_pd_);
      widen_dense_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, dense_, engine, f32_));
      narrow_dense_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, f32_, engine, dense_));
      if (!backward_) return 0;  // Y = s * values
      // dValues = dY * s, dGates = dY * values * s * (1 - s).
      sigmoid_backward_ = dnnl::eltwise_backward(onednn::eltwise_backward(
          engine, dnnl::algorithm::eltwise_logistic_use_dst_for_bwd, f32_, 0.0f, sigmoid));
      narrow_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, f32_, engine, half_));
      return 0;
    });
    gates_.resize(count);
    values_.resize(count);
    if (backward_) {
      product_.resize(count);
      gradient_.resize(count);
    }
  }

  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    const Tensor& a = in[backward_ ? 1 : 0];
    const std::size_t bytes = dtype_size(a.dtype);
    auto* a_values = static_cast<char*>(a.buffer->data());
    auto* a_gates = a_values + static_cast<std::size_t>(n_) * bytes;
    dnnl::memory s(f32_, engine_, gates_.data()), v(f32_, engine_, values_.data());
    dnnl::memory gates(half_, engine_, a_gates), values(half_, engine_, a_values);
    widen_.execute(stream_, gates, s);
    widen_.execute(stream_, values, v);
    sigmoid_.execute(stream_, {{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, s}});
    if (!backward_) {
      multiply_.execute(stream_, {{DNNL_ARG_SRC_0, s}, {DNNL_ARG_SRC_1, v}, {DNNL_ARG_DST, s}});
      dnnl::memory y(dense_, engine_, out[0].buffer->data());
      narrow_dense_.execute(stream_, s, y);
      stream_.wait();
      return;
    }
    dnnl::memory dy_stored(dense_, engine_, in[0].buffer->data()),
        dy(f32_, engine_, gradient_.data());
    widen_dense_.execute(stream_, dy_stored, dy);
    auto* da_values = static_cast<char*>(out[0].buffer->data());
    auto* da_gates = da_values + static_cast<std::size_t>(n_) * bytes;
    dnnl::memory t(f32_, engine_, product_.data());
    // dGates first: it needs values, whose scratch then takes dValues.
    multiply_.execute(stream_, {{DNNL_ARG_SRC_0, v}, {DNNL_ARG_SRC_1, dy}, {DNNL_ARG_DST, t}});
    sigmoid_backward_.execute(stream_,
                              {{DNNL_ARG_DIFF_DST, t}, {DNNL_ARG_DST, s}, {DNNL_ARG_DIFF_SRC, t}});
    dnnl::memory d_gates(half_, engine_, da_gates), d_values(half_, engine_, da_values);
    narrow_.execute(stream_, t, d_gates);
    multiply_.execute(stream_, {{DNNL_ARG_SRC_0, s}, {DNNL_ARG_SRC_1, dy}, {DNNL_ARG_DST, v}});
    narrow_.execute(stream_, v, d_values);
    stream_.wait();
  }

  std::string implementation() const override {
    return fmt::format("onednn {} {}", op_name(desc_.op), multiply_pd_.impl_info_str());
  }
  std::uint64_t workspace_bytes() const override {
    return (gates_.size() + values_.size() + product_.size() + gradient_.size()) * sizeof(float);
  }

 private:
  KernelDesc desc_;
  OperandTypes types_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  bool backward_;
  std::int64_t m_ = 0, n_ = 0;
  dnnl::memory::desc half_, dense_, f32_;
  dnnl::reorder widen_, narrow_, widen_dense_, narrow_dense_;
  dnnl::eltwise_forward sigmoid_;
  dnnl::eltwise_backward sigmoid_backward_;
  dnnl::binary::primitive_desc multiply_pd_;
  dnnl::binary multiply_;
  std::vector<float> gates_, values_, product_, gradient_;  // f32: s, values, dGates, dY
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_glu(const KernelDesc& desc, const dnnl::engine& engine) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OneDnnGlu>(desc, engine);
}

}  // namespace polyhal::cpu
