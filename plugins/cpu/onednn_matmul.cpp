#include "onednn_matmul.hpp"
#include "onednn_api.hpp"

#include <fmt/format.h>

#include "polyhal/error.hpp"
#include "polyhal/reference_kernels.hpp"

namespace polyhal::cpu {

dnnl::memory::data_type onednn_type(DType type) {
  switch (type) {
    case DType::f32:
      return dnnl::memory::data_type::f32;
    case DType::f16:
      return dnnl::memory::data_type::f16;
    case DType::bf16:
      return dnnl::memory::data_type::bf16;
    case DType::i32:
      return dnnl::memory::data_type::s32;
    case DType::i64:
      break;
  }
  throw KernelNotFoundError(fmt::format("oneDNN has no {} data type", dtype_name(type)));
}

void throw_no_onednn_implementation(const KernelDesc& desc, const dnnl::error& e) {
  throw KernelNotFoundError(fmt::format(
      "oneDNN has no implementation of {} on the ISA in force: {}", desc.to_string(), e.what()));
}

namespace {

using tag = dnnl::memory::format_tag;

class OneDnnMatMul final : public Kernel {
 public:
  OneDnnMatMul(const KernelDesc& desc, const dnnl::engine& engine)
      : engine_(engine), stream_(engine) {
    const auto dims = matmul_dims(desc);
    flops_ = 2.0 * static_cast<double>(dims.m) * static_cast<double>(dims.n) *
             static_cast<double>(dims.k);
    const DType out = desc.out_dtype();
    const dnnl::memory::desc a_md({dims.m, dims.k}, onednn_type(desc.dtype), tag::ab);
    const dnnl::memory::desc b_md({dims.k, dims.n}, onednn_type(desc.dtype), tag::ab);
    const dnnl::memory::desc c_md({dims.m, dims.n}, onednn_type(out), tag::ab);
    dnnl::primitive_attr attr;
    // Own the scratchpad so run() never allocates.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    primitive_desc_ =
        create_or_refuse(desc, [&] { return onednn::matmul(engine_, a_md, b_md, c_md, attr); });
    primitive_ = dnnl::matmul(primitive_desc_);
    a_ = dnnl::memory(a_md, engine_, DNNL_MEMORY_NONE);
    b_ = dnnl::memory(b_md, engine_, DNNL_MEMORY_NONE);
    c_ = dnnl::memory(c_md, engine_, DNNL_MEMORY_NONE);
    scratchpad_ = dnnl::memory(primitive_desc_.scratchpad_desc(), engine_);
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    a_.set_data_handle(inputs[0].buffer->data());
    b_.set_data_handle(inputs[1].buffer->data());
    c_.set_data_handle(outputs[0].buffer->data());
    primitive_.execute(stream_, {{DNNL_ARG_SRC, a_},
                                 {DNNL_ARG_WEIGHTS, b_},
                                 {DNNL_ARG_DST, c_},
                                 {DNNL_ARG_SCRATCHPAD, scratchpad_}});
    stream_.wait();
  }

  std::string implementation() const override {
    return fmt::format("onednn {}", primitive_desc_.impl_info_str());
  }
  std::uint64_t workspace_bytes() const override {
    return primitive_desc_.scratchpad_desc().get_size();
  }
  double flops() const override { return flops_; }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::matmul::primitive_desc primitive_desc_;
  dnnl::matmul primitive_;
  dnnl::memory a_, b_, c_, scratchpad_;
  double flops_ = 0.0;
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_matmul(const KernelDesc& desc, const dnnl::engine& engine) {
  return std::make_unique<OneDnnMatMul>(desc, engine);
}

}  // namespace polyhal::cpu
