// linear with LinearMath::int8 (op_schema.hpp, int8.hpp) through oneDNN.
// X is quantised to s8, with its calibrated step by a oneDNN reorder
// (static) or row by row by omp_quantize (dynamic; u8 after a shift when X
// is a GELU output); the s8 weights, per
// output channel, are packed once into the primitive's layout (VNNI on
// AVX-512, AMX-INT8 where the ISA allows; seven-bit where the CPU has no
// VNNI, so that vpmaddubsw's s16 pair sums cannot saturate). The s32 sums are dequantised by
// per-channel output scales and, when dynamic, a per-row binary multiply;
// bias, activation and residual are post-ops after that, the contract's
// order (oneDNN 2.x would add its own bias before scaling). The problem is
// posed as a batch of one [1, M, K] x [1, K, N]: oneDNN 2.6's brgemm
// broadcasts a [1, M, 1] operand only in that form (in 2-D it falls back to
// its reference kernel).
//
// Below VNNI (f32, no tanh) the sums come from oneDNN's 1x1 convolution
// over M positions instead (jit_uni_int8_1x1 on AVX2: faster than its
// gemm-based matmul at every row count of BERT's linears, and than our own
// 4 x 16 vpmaddubsw GEMM, which it replaced), and avx2_int8_epilogue turns
// them into the output in place. That convolution takes neither a per-row
// factor nor a source zero point without falling back to its reference
// kernel, so the whole epilogue is ours.
#include <fmt/format.h>

#include <bit>
#include <string>
#include <unordered_map>
#include <vector>

#include "avx2_int8_epilogue.hpp"
#include "omp_quantize.hpp"
#include "onednn_api.hpp"
#include "onednn_matmul.hpp"
#include "packed_weights.hpp"
#include "polyhal/error.hpp"
#include "polyhal/int8.hpp"
#include "thread_scratch.hpp"

namespace polyhal::cpu {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

/// How the s32 sums are made (see the top of this file).
enum class Product { onednn_matmul, onednn_convolution };

class OneDnnInt8Linear final : public Kernel {
 public:
  OneDnnInt8Linear(const KernelDesc& desc, bool avx512, float weight_max,
                   const dnnl::engine& engine, std::shared_ptr<PackedWeightCache> cache,
                   std::shared_ptr<ThreadScratch> scratch)
      : engine_(engine),
        stream_(engine),
        cache_(std::move(cache)),
        scratch_(std::move(scratch)),
        desc_(desc),
        avx512_(avx512),
        weight_max_(weight_max) {
    m_ = desc.input_shapes.at(0).at(0);
    k_ = desc.input_shapes.at(0).at(1);
    const auto& attrs = desc.attrs_as<LinearAttrs>();
    n_ = attrs.out_features;
    activation_ = attrs.activation;
    residual_ = attrs.residual;
    input_scale_ = attrs.input_scale;
    gelu_u8_ = input_scale_ == 0.0f && attrs.input_activation == Activation::gelu;
    // oneDNN's GEMM below VNNI multiplies an s8 source by copying it to u8
    // and summing its compensation on every call (4 times slower than u8 at
    // BERT's shapes): the s8 values go in as u8 + 128 with that zero point.
    shifted_u8_ = weight_max_ == kInt7Max && !gelu_u8_;
    if (!(input_scale_ >= 0.0f) || !std::isfinite(input_scale_))
      throw KernelNotFoundError(fmt::format("{}: int8 input_scale must be finite and >= 0, got {}",
                                            desc.to_string(), input_scale_));
    flops_ = 2.0 * static_cast<double>(m_ * n_) * static_cast<double>(k_);
    // Created now with unit scales, so a missing implementation is refused
    // at prepare; set_constants makes the real one once the weights' steps
    // are known.
    pd_ = create_or_refuse(desc, [&] { return make_pd(std::vector<float>(size_of(n_), 1.0f)); });
    if (!avx512_ && weight_max_ == kInt7Max && desc.dtype == DType::f32 &&
        activation_ != Activation::tanh && activation_ != Activation::relu && n_ % 8 == 0) {
      convolution_pd_ = make_convolution_pd();
      if (convolution_pd_) product_ = Product::onednn_convolution;
    }
    if (!dynamic()) {
      quantize_pd_ = create_or_refuse(desc, [&] {
        dnnl::primitive_attr attr;
        quantize_scale_ = onednn::Scales(attr, onednn::Scales::Of::reorder_result, 0,
                                         {1.0f / input_scale_}, engine_);
        return dnnl::reorder::primitive_desc(engine_, {{m_, k_}, onednn_type(desc_.dtype), tag::ab},
                                             engine_, {{m_, k_}, dt::s8, tag::ab}, attr);
      });
    }
  }

  void set_constants(std::span<const Tensor> constants) override {
    const bool smoothed = constants.size() == 3 && dynamic() && !gelu_u8_;
    if ((constants.size() != 2 && !smoothed) || constants[0].shape != Shape{n_, k_} ||
        constants[1].dtype != DType::f32) {
      throw RuntimeFailure(fmt::format(
          "{}: constants must be W[{}, {}] and an f32 bias (and s[{}], f32, for a dynamic s8 "
          "linear)",
          desc_.to_string(), n_, k_, k_));
    }
    inverse_smoothing_.clear();
    std::span<const float> smoothing;
    std::uint64_t salt = std::bit_cast<std::uint32_t>(weight_max_);
    if (smoothed) {
      if (constants[2].dtype != DType::f32 || constants[2].numel() != k_)
        throw RuntimeFailure(fmt::format("{}: smoothing must be f32 s[{}]", desc_.to_string(), k_));
      smoothing = std::span(constants[2].data<float>(), size_of(k_));
      if (const std::string problem = int8_smoothing_problem(smoothing, k_); !problem.empty())
        throw RuntimeFailure(fmt::format("{}: {}", desc_.to_string(), problem));
      for (const float v : smoothing) inverse_smoothing_.push_back(1.0f / v);
      salt ^= hash_bytes(smoothing.data(), smoothing.size_bytes());
    }
    // Quantised and packed once per device for every kernel given these
    // weights (and smoothing): the server's shapes share one copy. The
    // constructor's primitive has the final one's weight layout.
    const bool convolution = product_ == Product::onednn_convolution;
    const dnnl::memory::desc layout =
        convolution ? convolution_pd_.weights_desc() : pd_.weights_desc();
    packed_ = cache_->get<Int8Weights>(
        constants[0].buffer->data(), constants[0].bytes(), layout,
        (gelu_u8_ ? 3 : 2) + (convolution ? 4 : 0), salt, [&] {
          std::vector<float> w(size_of(n_ * k_));
          convert(constants[0].buffer->data(), constants[0].dtype, w.data(), DType::f32, w.size());
          if (!smoothing.empty()) smooth_weights(w, n_, k_, smoothing);
          Int8Weights out;
          std::vector<std::int8_t> q(w.size());
          out.weight_step.resize(size_of(n_));
          quantize_weights_per_channel(w, n_, k_, q, out.weight_step, weight_max_);
          out.bias_shift.assign(size_of(n_), 0.0f);
          if (gelu_u8_) subtract_gelu_shift(q, n_, k_, out.weight_step, out.bias_shift, false);
          if (convolution) {
            out.sums.assign(size_of(n_), 0);
            for (std::size_t i = 0; i < q.size(); ++i) out.sums[i / size_of(k_)] += q[i];
          }
          // W[N, K] row-major, seen as [1, K, N] (or as N filters of K x 1 x 1).
          dnnl::memory user(convolution ? dnnl::memory::desc({n_, k_, 1, 1}, dt::s8, tag::oihw)
                                        : dnnl::memory::desc({1, k_, n_}, dt::s8, tag::acb),
                            engine_, q.data());
          out.weights = dnnl::memory(layout, engine_);
          dnnl::reorder(user, out.weights).execute(stream_, user, out.weights);
          stream_.wait();
          return out;
        });
    const auto* bias = static_cast<const float*>(constants[1].buffer->data());
    bias_values_.assign(bias, bias + n_);
    for (std::size_t i = 0; i < bias_values_.size(); ++i) bias_values_[i] += packed_->bias_shift[i];
    std::vector<float> weight_step = packed_->weight_step;
    if (!dynamic())
      for (float& step : weight_step) step *= input_scale_;
    if (convolution) {
      column_step_ = std::move(weight_step);
    } else {
      pd_ = make_pd(weight_step);
      if (pd_.weights_desc() != layout)
        throw RuntimeFailure(desc_.to_string() +
                             ": oneDNN chose another weight layout once given the real scales");
      primitive_ = dnnl::matmul(pd_);
      weights_ = packed_->weights;
    }
    x_ = dnnl::memory({{m_, k_}, onednn_type(desc_.dtype), tag::ab}, engine_, DNNL_MEMORY_NONE);
    // The quantised X, its row steps and oneDNN's scratchpad live in the
    // device's scratch for the calling thread, set at each run.
    x_q_ = dnnl::memory(pd_.src_desc(), engine_, DNNL_MEMORY_NONE);
    x_q_at_ = scratch_layout_.add(pd_.src_desc().get_size());
    if (!dynamic()) {
      quantize_ = dnnl::reorder(quantize_pd_);
      x_q_2d_ = dnnl::memory({{m_, k_}, dt::s8, tag::ab}, engine_, DNNL_MEMORY_NONE);
    }
    dst_ = dnnl::memory(pd_.dst_desc(), engine_, DNNL_MEMORY_NONE);
    residual_mem_ = dnnl::memory(dst_md(), engine_, DNNL_MEMORY_NONE);
    bias_ = dnnl::memory(bias_md(), engine_, bias_values_.data());
    row_step_ = dnnl::memory(row_md(), engine_, DNNL_MEMORY_NONE);
    row_step_at_ = scratch_layout_.add(row_md().get_size());
    quantize_args_ = {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, x_q_2d_}};
    quantize_scale_.add_to(quantize_args_);
    if (convolution) {
      convolution_ = dnnl::convolution_forward(convolution_pd_);
      scratchpad_ = dnnl::memory(convolution_pd_.scratchpad_desc(), engine_, DNNL_MEMORY_NONE);
      scratchpad_at_ = scratch_layout_.add(convolution_pd_.scratchpad_desc().get_size());
      convolution_x_ = dnnl::memory(convolution_pd_.src_desc(), engine_, DNNL_MEMORY_NONE);
      convolution_sums_ = dnnl::memory(convolution_pd_.dst_desc(), engine_, DNNL_MEMORY_NONE);
      args_ = {{DNNL_ARG_SRC, convolution_x_},
               {DNNL_ARG_WEIGHTS, packed_->weights},
               {DNNL_ARG_DST, convolution_sums_},
               {DNNL_ARG_SCRATCHPAD, scratchpad_}};
      return;
    }
    scratchpad_ = dnnl::memory(pd_.scratchpad_desc(), engine_, DNNL_MEMORY_NONE);
    scratchpad_at_ = scratch_layout_.add(pd_.scratchpad_desc().get_size());
    args_ = {{DNNL_ARG_SRC, x_q_},
             {DNNL_ARG_WEIGHTS, weights_},
             {DNNL_ARG_DST, dst_},
             {DNNL_ARG_SCRATCHPAD, scratchpad_},
             {DNNL_ARG_ATTR_MULTIPLE_POST_OP(bias_index_) | DNNL_ARG_SRC_1, bias_}};
    if (dynamic()) args_.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, row_step_);
    if (residual_index_ >= 0)
      args_.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(residual_index_) | DNNL_ARG_SRC_1,
                    residual_mem_);
    output_scale_.add_to(args_);
    zero_point_.add_to(args_);
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    if (!packed_) throw RuntimeFailure(desc_.to_string() + ": run before set_constants");
    // The convolution's s32 sums go into the output itself (f32 of the same
    // size), or after the rest of the scratch when the residual lives there.
    const bool sums_aside =
        product_ == Product::onednn_convolution && residual_ && overlaps(inputs[1], outputs[0]);
    const std::uint64_t sums_at = scratch_layout_.bytes();
    std::byte* scratch =
        scratch_->get(sums_at + (sums_aside ? size_of(m_ * n_) * sizeof(std::int32_t) : 0));
    x_q_.set_data_handle(scratch + x_q_at_);
    if (x_q_2d_) x_q_2d_.set_data_handle(scratch + x_q_at_);
    row_step_.set_data_handle(scratch + row_step_at_);
    if (scratchpad_) scratchpad_.set_data_handle(scratch + scratchpad_at_);
    if (gelu_u8_) {
      quantize_gelu_rows_u8(inputs[0].buffer->data(), desc_.dtype, m_, k_,
                            static_cast<std::uint8_t*>(x_q_.get_data_handle()),
                            static_cast<float*>(row_step_.get_data_handle()), avx512_);
    } else if (dynamic()) {
      quantize_rows_s8(inputs[0].buffer->data(), desc_.dtype, m_, k_,
                       static_cast<std::int8_t*>(x_q_.get_data_handle()),
                       static_cast<float*>(row_step_.get_data_handle()), avx512_,
                       inverse_smoothing_.empty() ? nullptr : inverse_smoothing_.data(),
                       shifted_u8_);
    } else {
      x_.set_data_handle(inputs[0].buffer->data());
      quantize_.execute(stream_, quantize_args_);
      if (shifted_u8_) add_128(static_cast<std::int8_t*>(x_q_.get_data_handle()), m_ * k_);
    }
    if (product_ == Product::onednn_convolution) {
      Int8Epilogue epilogue{
          shifted_u8_ ? 128 : 0,
          dynamic() ? static_cast<const float*>(row_step_.get_data_handle()) : nullptr,
          column_step_.data(),
          bias_values_.data(),
          activation_,
          residual_ ? static_cast<const float*>(inputs[1].buffer->data()) : nullptr};
      auto* out = static_cast<float*>(outputs[0].buffer->data());
      auto* sums = reinterpret_cast<std::int32_t*>(sums_aside ? scratch + sums_at
                                                              : outputs[0].buffer->data());
      convolution_x_.set_data_handle(x_q_.get_data_handle());
      convolution_sums_.set_data_handle(sums);
      convolution_.execute(stream_, args_);
      stream_.wait();
      avx2_int8_epilogue(sums, m_, n_, packed_->sums.data(), epilogue, out);
      return;
    }
    dst_.set_data_handle(outputs[0].buffer->data());
    if (residual_index_ >= 0) residual_mem_.set_data_handle(inputs[1].buffer->data());
    primitive_.execute(stream_, args_);
    stream_.wait();
  }

  std::string implementation() const override {
    return fmt::format("{} int8 linear+{} ({} x {} -> s32; X {})",
                       product_ == Product::onednn_convolution
                           ? fmt::format("onednn {} 1x1 convolution, epilogue avx2_int8_epilogue",
                                         convolution_pd_.impl_info_str())
                           : std::string("onednn ") + pd_.impl_info_str(),
                       activation_name(activation_),
                       gelu_u8_      ? "u8 (GELU + 0.17)"
                       : shifted_u8_ ? "s8 as u8 - 128"
                                     : "s8",
                       weight_max_ == kInt7Max ? "s7 (seven-bit weights)" : "s8",
                       dynamic()
                           ? fmt::format("per row at run time{}, {}",
                                         inverse_smoothing_.empty() ? "" : ", smoothed",
                                         avx512_ ? "avx512 quantiser" : "avx2 quantiser")
                           : fmt::format("calibrated step, {}", quantize_pd_.impl_info_str()));
  }
  /// The packed s8 weights. oneDNN's scratch, the quantised X and its row
  /// steps live in the device's scratch for the calling thread
  /// (thread_scratch.hpp), one kernel's worth at a time: counted per kernel
  /// they would add BERT-base's 48 linears' run memory to a plan that holds
  /// one of them at a time.
  std::uint64_t workspace_bytes() const override {
    if (product_ == Product::onednn_convolution)
      return convolution_pd_.weights_desc().get_size() + size_of(n_) * sizeof(std::int32_t);
    return pd_.weights_desc().get_size();
  }
  double flops() const override { return flops_; }

 private:
  static std::size_t size_of(std::int64_t v) { return static_cast<std::size_t>(v); }
  /// Whether two tensors' bytes share any address.
  static bool overlaps(const Tensor& a, const Tensor& b) {
    const auto* a0 = static_cast<const std::byte*>(a.buffer->data());
    const auto* b0 = static_cast<const std::byte*>(b.buffer->data());
    return std::less<>{}(a0, b0 + b.bytes()) && std::less<>{}(b0, a0 + a.bytes());
  }
  bool dynamic() const { return input_scale_ == 0.0f; }
  dnnl::memory::desc dst_md() const { return {{1, m_, n_}, onednn_type(desc_.dtype), tag::abc}; }
  dnnl::memory::desc bias_md() const { return {{1, 1, n_}, dt::f32, tag::abc}; }
  dnnl::memory::desc row_md() const { return {{1, m_, 1}, dt::f32, tag::abc}; }

  /// The matmul with per-channel output scales; the row steps (dynamic),
  /// bias, activation and residual as post-ops, applied after the scale.
  dnnl::matmul::primitive_desc make_pd(const std::vector<float>& output_scale) {
    dnnl::post_ops post_ops;
    if (dynamic()) post_ops.append_binary(dnnl::algorithm::binary_mul, row_md());
    bias_index_ = post_ops.len();
    post_ops.append_binary(dnnl::algorithm::binary_add, bias_md());
    if (activation_ == Activation::gelu) {
      onednn::append_eltwise(post_ops, dnnl::algorithm::eltwise_gelu_erf);
    } else if (activation_ == Activation::tanh) {
      onednn::append_eltwise(post_ops, dnnl::algorithm::eltwise_tanh);
    } else if (activation_ == Activation::relu) {
      onednn::append_eltwise(post_ops, dnnl::algorithm::eltwise_relu);
    }
    if (residual_) {
      residual_index_ = post_ops.len();
      post_ops.append_binary(dnnl::algorithm::binary_add, dst_md());
    }
    dnnl::primitive_attr attr;
    output_scale_ =
        onednn::Scales(attr, onednn::Scales::Of::matmul_result, 1 << 2, output_scale, engine_);
    if (shifted_u8_) zero_point_ = onednn::SourceZeroPoint(attr, 128, engine_);
    attr.set_post_ops(post_ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::memory::desc src({1, m_, k_}, gelu_u8_ || shifted_u8_ ? dt::u8 : dt::s8, tag::abc);
    const dnnl::memory::desc weights({1, k_, n_}, dt::s8, tag::any);
    return onednn::matmul(engine_, src, weights, dst_md(), attr);
  }

  /// oneDNN's 1x1 convolution of X (u8, M positions of K channels) by W
  /// into s32 sums, when it has a JIT kernel for it; else empty.
  dnnl::convolution_forward::primitive_desc make_convolution_pd() const {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    try {
      dnnl::convolution_forward::primitive_desc pd = onednn::convolution(
          engine_, dnnl::prop_kind::forward_inference, {{1, k_, 1, m_}, dt::u8, tag::nhwc},
          {{n_, k_, 1, 1}, dt::s8, tag::any}, {{1, n_, 1, m_}, dt::s32, tag::nhwc},
          {{1, 1}, {0, 0}, {0, 0}}, attr);
      const std::string name = pd.impl_info_str();
      if (name.find("jit") != std::string::npos && name.find("ref") == std::string::npos) return pd;
    } catch (const dnnl::error&) {
      // No convolution for it: the matmul stays.
    }
    return {};
  }

  /// The quantised weights, packed, and what they set: the per-channel
  /// steps and the GELU shift's share of the bias (0 unless u8).
  struct Int8Weights {
    dnnl::memory weights;  // oneDNN's layout (matmul or convolution)
    std::vector<float> weight_step, bias_shift;
    std::vector<std::int32_t> sums;  // per channel, for the convolution's epilogue
  };

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::shared_ptr<PackedWeightCache> cache_;
  std::shared_ptr<ThreadScratch> scratch_;
  ScratchLayout scratch_layout_;
  std::uint64_t x_q_at_ = 0, row_step_at_ = 0, scratchpad_at_ = 0;  // offsets in the scratch
  std::shared_ptr<const Int8Weights> packed_;  // weights_, shared through cache_
  KernelDesc desc_;
  bool avx512_;
  float weight_max_;  // kInt8Max, or kInt7Max without VNNI (int8.hpp)
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul primitive_;
  dnnl::convolution_forward::primitive_desc convolution_pd_;  // Product::onednn_convolution
  dnnl::convolution_forward convolution_;
  dnnl::memory convolution_x_, convolution_sums_;
  dnnl::reorder::primitive_desc quantize_pd_;
  dnnl::reorder quantize_;
  onednn::Scales output_scale_, quantize_scale_;  // the result's factors, X's 1 / step
  onednn::SourceZeroPoint zero_point_;            // 128 when shifted_u8_
  dnnl::memory x_, x_q_, x_q_2d_, dst_, weights_, bias_, row_step_, scratchpad_, residual_mem_;
  int bias_index_ = 0, residual_index_ = -1;
  std::unordered_map<int, dnnl::memory> args_, quantize_args_;
  std::vector<float> bias_values_;        // the bias, less the GELU shift's share when u8
  std::vector<float> inverse_smoothing_;  // 1 / s[k] when smoothed (int8.hpp), else empty
  std::int64_t m_ = 0, n_ = 0, k_ = 0;
  Activation activation_ = Activation::none;
  bool residual_ = false;
  bool gelu_u8_ = false;     // dynamic, and X is a GELU output: u8 (int8.hpp)
  bool shifted_u8_ = false;  // below VNNI: X's s8 values go to oneDNN as u8 + 128
  Product product_ = Product::onednn_matmul;
  std::vector<float> column_step_;  // convolution: the weights' steps (times X's when static)
  float input_scale_ = 0.0f;
  double flops_ = 0.0;
};

}  // namespace

std::unique_ptr<Kernel> make_onednn_int8_linear(const KernelDesc& desc, bool avx512,
                                                float weight_max, const dnnl::engine& engine,
                                                std::shared_ptr<PackedWeightCache> packed_weights,
                                                std::shared_ptr<ThreadScratch> scratch) {
  return std::make_unique<OneDnnInt8Linear>(desc, avx512, weight_max, engine,
                                            std::move(packed_weights), std::move(scratch));
}

}  // namespace polyhal::cpu
