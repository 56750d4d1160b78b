// GELU and swish for training and GroupBERT on the CPU (train_kernels.hpp
// "gelu", "gelu_backward", "swish", "swish_backward") through oneDNN's JIT
// eltwise primitives (GELU in its exact erf form, as BERT uses; swish as
// x * sigmoid(x)): vectorised erf and exp instead of a libm call per element.
// f32 storage, or bf16 with round_to=bf16 (oneDNN computes in f32 and
// rounds to nearest even).
#include <fmt/format.h>

#include "onednn_api.hpp"
#include "onednn_gemm.hpp"
#include "onednn_matmul.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

using dt = dnnl::memory::data_type;

/// oneDNN's algorithm for `op` (swish's alpha is 1: x * sigmoid(1 * x)).
dnnl::algorithm eltwise_algorithm(OpKind op) {
  return op == OpKind::swish || op == OpKind::swish_backward ? dnnl::algorithm::eltwise_swish
                                                             : dnnl::algorithm::eltwise_gelu_erf;
}

class OneDnnEltwise final : public Kernel {
 public:
  OneDnnEltwise(const KernelDesc& desc, const dnnl::engine& engine)
      : desc_(desc),
        types_(operand_types(desc)),
        stream_(engine),
        count_(element_count(desc.input_shapes.at(0))),
        backward_(desc.op == OpKind::gelu_backward || desc.op == OpKind::swish_backward) {
    const dnnl::algorithm algorithm = eltwise_algorithm(desc.op);
    const float alpha = algorithm == dnnl::algorithm::eltwise_swish ? 1.0f : 0.0f;
    const dnnl::memory::desc md({count_}, operand_type(desc.round_to), dnnl::memory::format_tag::a);
    create_or_refuse(desc, [&] {
      const dnnl::eltwise_forward::primitive_desc forward =
          onednn::eltwise(engine, dnnl::prop_kind::forward_training, algorithm, md, alpha);
      if (backward_) {
        backward_pd_ = onednn::eltwise_backward(engine, algorithm, md, alpha, forward);
        backward_prim_ = dnnl::eltwise_backward(backward_pd_);
      } else {
        forward_pd_ = forward;
        forward_prim_ = dnnl::eltwise_forward(forward_pd_);
      }
      return 0;
    });
    a_ = dnnl::memory(md, engine, DNNL_MEMORY_NONE);
    b_ = dnnl::memory(md, engine, DNNL_MEMORY_NONE);
    out_ = dnnl::memory(md, engine, DNNL_MEMORY_NONE);
  }

  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    a_.set_data_handle(in[0].buffer->data());
    out_.set_data_handle(out[0].buffer->data());
    if (backward_) {  // in: dY, X
      b_.set_data_handle(in[1].buffer->data());
      backward_prim_.execute(
          stream_, {{DNNL_ARG_DIFF_DST, a_}, {DNNL_ARG_SRC, b_}, {DNNL_ARG_DIFF_SRC, out_}});
    } else {
      forward_prim_.execute(stream_, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_DST, out_}});
    }
    stream_.wait();
  }
  std::string implementation() const override {
    return fmt::format("onednn {} {}", op_name(desc_.op),
                       backward_ ? backward_pd_.impl_info_str() : forward_pd_.impl_info_str());
  }

 private:
  KernelDesc desc_;
  OperandTypes types_;
  dnnl::stream stream_;
  std::int64_t count_;
  bool backward_;
  dnnl::eltwise_forward::primitive_desc forward_pd_;
  dnnl::eltwise_forward forward_prim_;
  dnnl::eltwise_backward::primitive_desc backward_pd_;
  dnnl::eltwise_backward backward_prim_;
  dnnl::memory a_, b_, out_;
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_eltwise_train(const KernelDesc& desc,
                                                  const dnnl::engine& engine) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OneDnnEltwise>(desc, engine);
}

}  // namespace polyhal::cpu
