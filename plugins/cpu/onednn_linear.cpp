#include <fmt/format.h>

#include <unordered_map>

#include "onednn_matmul.hpp"
#include "polyhal/error.hpp"

namespace polyhal::cpu {
namespace {

using tag = dnnl::memory::format_tag;

/// Y = act(X W^T + b) as one oneDNN matmul with a bias and an eltwise
/// post-op. The weights are reordered once, in set_constants, into the
/// blocked layout the primitive asked for (format_tag::any): packed once,
/// never per run. LinearMath::bf16_products (bf32) on f32 tensors: W is
/// packed as bf16 and X rounded to bf16 by a reorder before each run, so
/// the products run on AVX512-BF16 (or AMX-BF16) with f32 accumulation and
/// an f32 Y. oneDNN's own fpmath_mode is not relied on: 2.6 ignores it on
/// CPUs without AMX.
class OneDnnLinear final : public Kernel {
 public:
  OneDnnLinear(const KernelDesc& desc, const dnnl::engine& engine)
      : engine_(engine), stream_(engine) {
    const std::int64_t m = desc.input_shapes.at(0).at(0), k = desc.input_shapes.at(0).at(1);
    const auto& attrs = desc.attrs_as<LinearAttrs>();
    const std::int64_t n = attrs.out_features;
    flops_ = 2.0 * static_cast<double>(m * n) * static_cast<double>(k);
    bf16_products_ = attrs.math == LinearMath::bf16_products;
    if (bf16_products_ && desc.dtype != DType::f32)
      throw KernelNotFoundError(
          fmt::format("{}: bf16 products are for f32 tensors (bf32)", desc.to_string()));
    const auto type = bf16_products_ ? dnnl::memory::data_type::bf16 : onednn_type(desc.dtype);
    const dnnl::memory::desc src_md({m, k}, type, tag::ab);
    const dnnl::memory::desc weights_md({k, n}, type, tag::any);
    const dnnl::memory::desc bias_md({1, n}, dnnl::memory::data_type::f32, tag::ab);
    const dnnl::memory::desc dst_md({m, n}, onednn_type(desc.out_dtype()), tag::ab);
    user_weights_md_ = dnnl::memory::desc({k, n}, onednn_type(desc.dtype),
                                          tag::ba);  // W[N, K] row-major, seen as [K, N]
    n_ = n;
    k_ = k;
    dnnl::post_ops post_ops;
    activation_ = attrs.activation;
    if (activation_ == Activation::gelu) {
      post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    } else if (activation_ == Activation::tanh) {
      post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f);
    }
    if (attrs.residual) {
      // Y += R as a binary post-op: the residual costs no extra pass.
      residual_index_ = post_ops.len();
      post_ops.append_binary(dnnl::algorithm::binary_add, dst_md);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(post_ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    pd_ = create_or_refuse(desc, [&] {
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, weights_md, bias_md, dst_md),
                                          attr, engine_);
    });
    primitive_ = dnnl::matmul(pd_);
    if (bf16_products_) {
      const dnnl::memory::desc f32_src({m, k}, dnnl::memory::data_type::f32, tag::ab);
      to_bf16_ = create_or_refuse(desc, [&] {
        return dnnl::reorder(dnnl::reorder::primitive_desc(engine_, f32_src, engine_, src_md));
      });
      user_src_ = dnnl::memory(f32_src, engine_, DNNL_MEMORY_NONE);
      src_ = dnnl::memory(pd_.src_desc(), engine_);  // X in bf16, the kernel's own
    } else {
      src_ = dnnl::memory(pd_.src_desc(), engine_, DNNL_MEMORY_NONE);
    }
    dst_ = dnnl::memory(pd_.dst_desc(), engine_, DNNL_MEMORY_NONE);
    residual_ = dnnl::memory(dst_md, engine_, DNNL_MEMORY_NONE);
    scratchpad_ = dnnl::memory(pd_.scratchpad_desc(), engine_);
  }

  void set_constants(std::span<const Tensor> constants) override {
    if (constants.size() != 2 || constants[0].shape != Shape{n_, k_} ||
        constants[1].dtype != DType::f32) {
      throw RuntimeFailure(
          fmt::format("linear: constants must be W[{}, {}] and an f32 bias", n_, k_));
    }
    dnnl::memory user(user_weights_md_, engine_, constants[0].buffer->data());
    weights_ = dnnl::memory(pd_.weights_desc(), engine_);
    dnnl::reorder(user, weights_).execute(stream_, user, weights_);
    stream_.wait();
    bias_tensor_ = constants[1];
    bias_ = dnnl::memory(pd_.bias_desc(), engine_, bias_tensor_.buffer->data());
    // Built once: run() only rebinds data pointers, so it allocates nothing.
    args_ = {{DNNL_ARG_SRC, src_},
             {DNNL_ARG_WEIGHTS, weights_},
             {DNNL_ARG_BIAS, bias_},
             {DNNL_ARG_DST, dst_},
             {DNNL_ARG_SCRATCHPAD, scratchpad_}};
    if (residual_index_ >= 0) {
      args_.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(residual_index_) | DNNL_ARG_SRC_1, residual_);
    }
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    if (bf16_products_) {
      user_src_.set_data_handle(inputs[0].buffer->data());
      to_bf16_.execute(stream_, user_src_, src_);
    } else {
      src_.set_data_handle(inputs[0].buffer->data());
    }
    dst_.set_data_handle(outputs[0].buffer->data());
    if (residual_index_ >= 0) residual_.set_data_handle(inputs[1].buffer->data());
    primitive_.execute(stream_, args_);
    stream_.wait();
  }

  std::string implementation() const override {
    return fmt::format("onednn {} linear+{}{}", pd_.impl_info_str(), activation_name(activation_),
                       bf16_products_ ? " (bf16 products of f32 tensors)" : "");
  }
  /// oneDNN's scratch and the kernel's own packed copy of the weights
  /// (made in set_constants, in the layout the primitive chose).
  std::uint64_t workspace_bytes() const override {
    return pd_.scratchpad_desc().get_size() + pd_.weights_desc().get_size() +
           (bf16_products_ ? pd_.src_desc().get_size() : 0);
  }
  double flops() const override { return flops_; }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul primitive_;
  dnnl::memory::desc user_weights_md_;
  dnnl::memory src_, dst_, weights_, bias_, scratchpad_, residual_, user_src_;
  dnnl::reorder to_bf16_;
  bool bf16_products_ = false;
  int residual_index_ = -1;
  std::unordered_map<int, dnnl::memory> args_;
  Tensor bias_tensor_;  // keeps the bias buffer alive
  std::int64_t n_ = 0, k_ = 0;
  Activation activation_ = Activation::none;
  double flops_ = 0.0;
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_linear(const KernelDesc& desc, const dnnl::engine& engine) {
  return std::make_unique<OneDnnLinear>(desc, engine);
}

}  // namespace polyhal::cpu
