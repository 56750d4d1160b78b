// GELU for training on the CPU (train_kernels.hpp "gelu", "gelu_backward")
// through oneDNN's JIT eltwise primitives (exact erf form, as BERT uses):
// vectorised erf instead of a libm call per element. f32 data; with
// round_to=bf16 the result is rounded to bf16 like every mixed-precision op.
#include <fmt/format.h>

#include "omp_convert.hpp"
#include "onednn_matmul.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

using dt = dnnl::memory::data_type;

class OneDnnGelu final : public Kernel {
 public:
  OneDnnGelu(const KernelDesc& desc, const dnnl::engine& engine)
      : stream_(engine),
        type_(round_type(desc)),
        count_(element_count(desc.input_shapes.at(0))),
        backward_(desc.op == OpKind::gelu_backward) {
    const dnnl::memory::desc md({count_}, dt::f32, dnnl::memory::format_tag::a);
    create_or_refuse(desc, [&] {
      const dnnl::eltwise_forward::primitive_desc forward(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::eltwise_gelu_erf, md),
          engine);
      if (backward_) {
        backward_pd_ = dnnl::eltwise_backward::primitive_desc(
            dnnl::eltwise_backward::desc(dnnl::algorithm::eltwise_gelu_erf, md, md), engine,
            forward);
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
    a_.set_data_handle(in[0].data<float>());
    out_.set_data_handle(out[0].data<float>());
    if (backward_) {  // in: dY, X
      b_.set_data_handle(in[1].data<float>());
      backward_prim_.execute(
          stream_, {{DNNL_ARG_DIFF_DST, a_}, {DNNL_ARG_SRC, b_}, {DNNL_ARG_DIFF_SRC, out_}});
    } else {
      forward_prim_.execute(stream_, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_DST, out_}});
    }
    stream_.wait();
    if (type_ == DType::bf16) round_to_bf16(out[0].data<float>(), count_);
  }
  std::string implementation() const override {
    return fmt::format("onednn {} {}", backward_ ? "gelu_backward" : "gelu",
                       backward_ ? backward_pd_.impl_info_str() : forward_pd_.impl_info_str());
  }

 private:
  dnnl::stream stream_;
  DType type_;
  std::int64_t count_;
  bool backward_;
  dnnl::eltwise_forward::primitive_desc forward_pd_;
  dnnl::eltwise_forward forward_prim_;
  dnnl::eltwise_backward::primitive_desc backward_pd_;
  dnnl::eltwise_backward backward_prim_;
  dnnl::memory a_, b_, out_;
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_gelu_train(const KernelDesc& desc, const dnnl::engine& engine) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OneDnnGelu>(desc, engine);
}

}  // namespace polyhal::cpu
