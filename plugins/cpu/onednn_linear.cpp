#include <fmt/format.h>

#include <optional>
#include <unordered_map>
#include <vector>

#include "omp_round_f16.hpp"
#include "onednn_api.hpp"
#include "onednn_matmul.hpp"
#include "packed_weights.hpp"
#include "polyhal/error.hpp"

namespace polyhal::cpu {
namespace {

using tag = dnnl::memory::format_tag;

/// oneDNN's f32 GEMM on AVX2 asks for plain [K, N] weights. Where a weight
/// row is a multiple of 2 KiB (N of 512, 1024, 1536, 3072 f32), the rows a
/// GEMM kernel reads together fall into the same cache sets, and a GEMM of
/// few rows runs at about half speed: bert-base's FFN up (768 x 3072) at 32
/// to 256 rows, 66 to 75 against 124 to 145 GFLOP/s with the rows 64 bytes
/// longer (AMD EPYC Zen 3, 2 threads, oneDNN 2.7). So such rows are padded.
constexpr std::int64_t kAliasingRowBytes = 2048;
constexpr std::int64_t kRowPaddingBytes = 64;

/// `chosen` with rows padded by kRowPaddingBytes, where it is the plain
/// [K, N] layout with rows of a multiple of kAliasingRowBytes; nullopt
/// otherwise (a blocked layout has no such rows).
std::optional<dnnl::memory::desc> padded_weight_rows(const dnnl::memory::desc& chosen,
                                                     std::int64_t k, std::int64_t n,
                                                     dnnl::memory::data_type type) {
  if (!(chosen == dnnl::memory::desc({k, n}, type, tag::ab))) return std::nullopt;
  const auto bytes = static_cast<std::int64_t>(dnnl::memory::data_type_size(type));
  if (n * bytes % kAliasingRowBytes != 0) return std::nullopt;
  return dnnl::memory::desc({k, n}, type, dnnl::memory::dims{n + kRowPaddingBytes / bytes, 1});
}

/// Y = act(X W^T + b) as one oneDNN matmul with a bias and an eltwise
/// post-op. The weights are reordered once, in set_constants, into the
/// blocked layout the primitive asked for (format_tag::any): packed once,
/// never per run.
///
/// Products of f32 tensors in a narrower type (LinearAttrs::math):
/// - bf16_products (bf32): W is packed as bf16 and X rounded to bf16 by a
///   reorder before each run, so the products run on AVX512-BF16 (or
///   AMX-BF16) with f32 accumulation and an f32 Y. oneDNN's own fpmath_mode
///   is not relied on: 2.6 ignores it on CPUs without AMX.
/// - f16_products: the same with f16 where oneDNN has an f16 matmul for
///   this CPU (AMX-FP16 or AVX512-FP16, oneDNN 3). Where it has none (every
///   CPU with Debian's oneDNN 2.6), X and W are rounded to f16 and multiplied
///   by the f32 kernel: the same products (an f16 x f16 product is exact in
///   f32) and the same f32 accumulation, at f32 speed; implementation() says
///   which ran and why.
class OneDnnLinear final : public Kernel {
 public:
  OneDnnLinear(const KernelDesc& desc, bool avx512, const dnnl::engine& engine,
               std::shared_ptr<PackedWeightCache> cache)
      : engine_(engine), stream_(engine), cache_(std::move(cache)), avx512_(avx512) {
    const std::int64_t m = desc.input_shapes.at(0).at(0), k = desc.input_shapes.at(0).at(1);
    const auto& attrs = desc.attrs_as<LinearAttrs>();
    const std::int64_t n = attrs.out_features;
    flops_ = 2.0 * static_cast<double>(m * n) * static_cast<double>(k);
    math_ = attrs.math;
    if (math_ != LinearMath::native && desc.dtype != DType::f32)
      throw KernelNotFoundError(fmt::format("{}: {} products are for f32 tensors", desc.to_string(),
                                            linear_math_name(math_)));
    const dnnl::memory::desc bias_md({1, n}, dnnl::memory::data_type::f32, tag::ab);
    const dnnl::memory::desc dst_md({m, n}, onednn_type(desc.out_dtype()), tag::ab);
    user_weights_md_ = dnnl::memory::desc({k, n}, onednn_type(desc.dtype),
                                          tag::ba);  // W[N, K] row-major, seen as [K, N]
    n_ = n;
    k_ = k;
    dnnl::post_ops post_ops;
    activation_ = attrs.activation;
    if (activation_ == Activation::gelu) {
      onednn::append_eltwise(post_ops, dnnl::algorithm::eltwise_gelu_erf);
    } else if (activation_ == Activation::tanh) {
      onednn::append_eltwise(post_ops, dnnl::algorithm::eltwise_tanh);
    } else if (activation_ == Activation::relu) {
      onednn::append_eltwise(post_ops, dnnl::algorithm::eltwise_relu);
    }
    if (attrs.residual) {
      // Y += R as a binary post-op: the residual costs no extra pass.
      residual_index_ = post_ops.len();
      post_ops.append_binary(dnnl::algorithm::binary_add, dst_md);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(post_ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto matmul_pd = [&](dnnl::memory::data_type type) {
      auto pd = onednn::matmul(engine_, dnnl::memory::desc({m, k}, type, tag::ab),
                               dnnl::memory::desc({k, n}, type, tag::any), bias_md, dst_md, attr);
      if (const auto padded = padded_weight_rows(pd.weights_desc(), k, n, type)) {
        try {
          pd = onednn::matmul(engine_, dnnl::memory::desc({m, k}, type, tag::ab), *padded, bias_md,
                              dst_md, attr);
          padded_rows_ = true;
        } catch (const dnnl::error&) {
          // No kernel for padded rows: the plain layout, at its speed.
        }
      }
      return pd;
    };
    auto product_type = math_ == LinearMath::bf16_products  ? dnnl::memory::data_type::bf16
                        : math_ == LinearMath::f16_products ? dnnl::memory::data_type::f16
                                                            : onednn_type(desc.dtype);
    if (math_ == LinearMath::f16_products) {
      try {
        pd_ = matmul_pd(product_type);
      } catch (const dnnl::error&) {
        f16_fallback_ = fmt::format(
            "oneDNN {} has no f16 matmul for this CPU (it needs AMX-FP16 or AVX512-FP16)",
            onednn::version_text());
        product_type = dnnl::memory::data_type::f32;
      }
    }
    if (!pd_) pd_ = create_or_refuse(desc, [&] { return matmul_pd(product_type); });
    primitive_ = dnnl::matmul(pd_);
    const dnnl::memory::desc f32_src({m, k}, dnnl::memory::data_type::f32, tag::ab);
    if (math_ != LinearMath::native) {
      // X rounded into the kernel's own buffer: to bf16/f16 by a reorder,
      // or (the f32 fallback) through f16 and back by round_through_f16.
      const dnnl::memory::desc narrow_src({m, k},
                                          math_ == LinearMath::bf16_products
                                              ? dnnl::memory::data_type::bf16
                                              : dnnl::memory::data_type::f16,
                                          tag::ab);
      user_src_ = dnnl::memory(f32_src, engine_, DNNL_MEMORY_NONE);
      if (f16_fallback_.empty()) {
        to_narrow_ = create_or_refuse(desc, [&] {
          return dnnl::reorder(
              dnnl::reorder::primitive_desc(engine_, f32_src, engine_, narrow_src));
        });
        narrow_ = dnnl::memory(narrow_src, engine_);
      }
      src_ = f16_fallback_.empty() ? narrow_ : dnnl::memory(pd_.src_desc(), engine_);
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
    // Packed once per device for every kernel given these weights in this
    // layout (the server's shapes share one copy).
    packed_weights_ =
        cache_->get(constants[0].buffer->data(), constants[0].bytes(), pd_.weights_desc(),
                    f16_fallback_.empty() ? 0 : 1, [&] {
                      dnnl::memory user(user_weights_md_, engine_, constants[0].buffer->data());
                      std::vector<float> rounded;
                      if (!f16_fallback_.empty()) {
                        // The f32 kernel multiplies W as f16 would hold it.
                        const auto* w = static_cast<const float*>(constants[0].buffer->data());
                        rounded.assign(w, w + constants[0].numel());
                        for (float& v : rounded) v = round_through(DType::f16, v);
                        user.set_data_handle(rounded.data());
                      }
                      dnnl::memory packed(pd_.weights_desc(), engine_);
                      dnnl::reorder(user, packed).execute(stream_, user, packed);
                      stream_.wait();
                      return packed;
                    });
    weights_ = *packed_weights_;
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
    if (!f16_fallback_.empty()) {
      round_through_f16(inputs[0].data<float>(), static_cast<float*>(src_.get_data_handle()),
                        inputs[0].numel(), avx512_);
    } else if (math_ != LinearMath::native) {
      user_src_.set_data_handle(inputs[0].buffer->data());
      to_narrow_.execute(stream_, user_src_, narrow_);
    } else {
      src_.set_data_handle(inputs[0].buffer->data());
    }
    dst_.set_data_handle(outputs[0].buffer->data());
    if (residual_index_ >= 0) residual_.set_data_handle(inputs[1].buffer->data());
    primitive_.execute(stream_, args_);
    stream_.wait();
  }

  std::string implementation() const override {
    std::string math;
    if (math_ != LinearMath::native)
      math = fmt::format(
          " ({} products of f32 tensors{}{})", linear_math_name(math_),
          f16_fallback_.empty() ? "" : ", f16-rounded operands on the f32 kernel: ", f16_fallback_);
    return fmt::format("onednn {} linear+{}{}{}", pd_.impl_info_str(), activation_name(activation_),
                       padded_rows_ ? " (weight rows padded)" : "", math);
  }
  /// oneDNN's scratch and the packed copy of the weights (made in
  /// set_constants, in the layout the primitive chose; kernels given the
  /// same weights share it, which the plan does not count).
  std::uint64_t workspace_bytes() const override {
    return pd_.scratchpad_desc().get_size() + pd_.weights_desc().get_size() +
           (math_ != LinearMath::native ? pd_.src_desc().get_size() : 0);
  }
  double flops() const override { return flops_; }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul primitive_;
  dnnl::memory::desc user_weights_md_;
  dnnl::memory src_, dst_, weights_, bias_, scratchpad_, residual_, user_src_, narrow_;
  std::shared_ptr<PackedWeightCache> cache_;
  std::shared_ptr<dnnl::memory> packed_weights_;  // weights_, shared through cache_
  dnnl::reorder to_narrow_;
  bool padded_rows_ = false;  ///< weights in padded rows (padded_weight_rows)
  bool avx512_ = false;       ///< round_through_f16 may use AVX-512 (the ISA choice allows it)
  LinearMath math_ = LinearMath::native;
  std::string f16_fallback_;  ///< why f16 products run on the f32 kernel, or empty
  int residual_index_ = -1;
  std::unordered_map<int, dnnl::memory> args_;
  Tensor bias_tensor_;  // keeps the bias buffer alive
  std::int64_t n_ = 0, k_ = 0;
  Activation activation_ = Activation::none;
  double flops_ = 0.0;
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_linear(const KernelDesc& desc, bool avx512,
                                           const dnnl::engine& engine,
                                           std::shared_ptr<PackedWeightCache> packed_weights) {
  return std::make_unique<OneDnnLinear>(desc, avx512, engine, std::move(packed_weights));
}

}  // namespace polyhal::cpu
