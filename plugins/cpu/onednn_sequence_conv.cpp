// GroupBERT's grouped convolution along the sequence (train_kernels.hpp
// "sequence_conv", "sequence_conv_backward") through oneDNN's grouped 1-D
// convolution. The [B*S, N] activations are oneDNN's nwc layout and the
// [N, C, K] weights its goiw, so nothing is reordered. oneDNN pads each row
// with zeros; padding tokens are zeroed in scratch first and their outputs
// set to 0 after, which is the op's rule for rows of one sequence. Packed
// rows (a mask number above 1: several sequences in a row) run on the
// reference kernel, which keeps each tap inside its sequence.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
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
using Dims = dnnl::memory::dims;

/// The convolution's memory descriptors and geometry.
struct ConvGeometry {
  SequenceConvAttrs a;
  std::int64_t channels = 0;
  dnnl::memory::desc src, weights, weights_f32, dst, weights_any, weights_f32_any;
  onednn::ConvolutionShape shape{{1}, {}, {}};

  ConvGeometry(const KernelDesc& desc, std::size_t x_input)
      : a(desc.attrs_as<SequenceConvAttrs>()), channels(desc.input_shapes.at(x_input).at(1)) {
    if (a.group_size <= 0 || channels % a.group_size != 0 || a.kernel <= 0 ||
        desc.input_shapes.at(x_input).at(0) != a.batch * a.seq)
      throw KernelNotFoundError(fmt::format("cpu {}: inconsistent shapes", op_name(desc.op)));
    const dt type = operand_type(desc.round_to);
    const std::int64_t groups = channels / a.group_size;
    src = dnnl::memory::desc({a.batch, channels, a.seq}, type, tag::nwc);
    dst = src;
    weights = dnnl::memory::desc({groups, a.group_size, a.group_size, a.kernel}, type, tag::goiw);
    weights_f32 =
        dnnl::memory::desc({groups, a.group_size, a.group_size, a.kernel}, dt::f32, tag::goiw);
    // oneDNN's jit convolutions want their own blocked weight layout.
    weights_any =
        dnnl::memory::desc({groups, a.group_size, a.group_size, a.kernel}, type, tag::any);
    weights_f32_any =
        dnnl::memory::desc({groups, a.group_size, a.group_size, a.kernel}, dt::f32, tag::any);
    shape.padding_l = {(a.kernel - 1) / 2};
    shape.padding_r = {a.kernel - 1 - (a.kernel - 1) / 2};
  }
  /// The forward convolution (also backward's hint).
  dnnl::convolution_forward::primitive_desc forward(const dnnl::engine& engine) const {
    return onednn::convolution(engine, dnnl::prop_kind::forward_training, src, weights_any, dst,
                               shape);
  }
  /// Multiply-adds x 2 of the forward convolution (backward does twice that).
  double flops() const {
    return 2.0 * static_cast<double>(a.batch * a.seq * channels * a.group_size * a.kernel);
  }
  std::size_t row_bytes(DType type) const {
    return static_cast<std::size_t>(channels) * dtype_size(type);
  }
};

/// Whether the mask holds packed rows (a sequence number above 1).
bool packed(const Tensor& mask) {
  const auto* m = mask.data<std::int32_t>();
  return std::any_of(m, m + mask.numel(), [](std::int32_t v) { return v > 1; });
}

/// Copies `rows` of `from` into `to`, zeroing the rows whose mask is 0.
void copy_masked(const void* from, void* to, const std::int32_t* mask, std::int64_t rows,
                 std::size_t row_bytes) {
  const auto* src = static_cast<const char*>(from);
  auto* dst = static_cast<char*>(to);
#pragma omp parallel for
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::size_t at = static_cast<std::size_t>(r) * row_bytes;
    if (mask[r] != 0) {
      std::memcpy(dst + at, src + at, row_bytes);
    } else {
      std::memset(dst + at, 0, row_bytes);
    }
  }
}

void zero_masked(void* data, const std::int32_t* mask, std::int64_t rows, std::size_t row_bytes) {
  auto* dst = static_cast<char*>(data);
#pragma omp parallel for
  for (std::int64_t r = 0; r < rows; ++r)
    if (mask[r] == 0) std::memset(dst + static_cast<std::size_t>(r) * row_bytes, 0, row_bytes);
}

/// Weights in the layout a primitive chose: reordered from (or to) the
/// tensor's goiw each run, as the weights change every step; the tensor
/// itself when the layouts agree.
class WeightLayout {
 public:
  /// to_primitive: user -> primitive before a run; else primitive -> user after.
  WeightLayout(const dnnl::engine& engine, const dnnl::memory::desc& user,
               const dnnl::memory::desc& chosen, bool to_primitive)
      : engine_(engine), user_(user), same_(user == chosen), to_primitive_(to_primitive) {
    if (same_) return;
    chosen_ = dnnl::memory(chosen, engine);
    reorder_ = to_primitive
                   ? dnnl::reorder(dnnl::reorder::primitive_desc(engine, user, engine, chosen))
                   : dnnl::reorder(dnnl::reorder::primitive_desc(engine, chosen, engine, user));
  }
  /// The memory the primitive reads or writes for the tensor at `data`.
  dnnl::memory bind(dnnl::stream& stream, void* data) {
    user_memory_ = dnnl::memory(user_, engine_, data);
    if (same_) return user_memory_;
    if (to_primitive_) reorder_.execute(stream, user_memory_, chosen_);
    return chosen_;
  }
  /// After the primitive ran: its result copied back into the tensor.
  void finish(dnnl::stream& stream) {
    if (!same_ && !to_primitive_) reorder_.execute(stream, chosen_, user_memory_);
  }

 private:
  dnnl::engine engine_;
  dnnl::memory::desc user_;
  bool same_ = true, to_primitive_ = true;
  dnnl::memory chosen_, user_memory_;
  dnnl::reorder reorder_;
};

class OneDnnSequenceConv final : public Kernel {
 public:
  OneDnnSequenceConv(const KernelDesc& desc, const dnnl::engine& engine,
                     std::unique_ptr<Kernel> packed_fallback)
      : desc_(desc),
        types_(operand_types(desc)),
        engine_(engine),
        stream_(engine),
        g_(desc, 0),
        fallback_(std::move(packed_fallback)),
        pd_(g_.forward(engine)),
        primitive_(pd_),
        weights_(engine, g_.weights, pd_.weights_desc(), true),
        masked_(g_.src.get_size()) {}

  /// in: X, W (at round_to), mask (i32) -> Y (at round_to).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    if (packed(in[2])) return fallback_->run(in, out);
    const auto* mask = in[2].data<std::int32_t>();
    const std::int64_t rows = g_.a.batch * g_.a.seq;
    const std::size_t row = g_.row_bytes(in[0].dtype);
    copy_masked(in[0].buffer->data(), masked_.data(), mask, rows, row);
    primitive_.execute(stream_,
                       {{DNNL_ARG_SRC, dnnl::memory(g_.src, engine_, masked_.data())},
                        {DNNL_ARG_WEIGHTS, weights_.bind(stream_, in[1].buffer->data())},
                        {DNNL_ARG_DST, dnnl::memory(g_.dst, engine_, out[0].buffer->data())}});
    stream_.wait();
    zero_masked(out[0].buffer->data(), mask, rows, row);
  }
  std::string implementation() const override {
    return "onednn sequence_conv " + std::string(pd_.impl_info_str());
  }
  double flops() const override { return g_.flops(); }

 private:
  KernelDesc desc_;
  OperandTypes types_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  ConvGeometry g_;
  std::unique_ptr<Kernel> fallback_;
  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward primitive_;
  WeightLayout weights_;
  std::vector<char> masked_;
};

class OneDnnSequenceConvBackward final : public Kernel {
 public:
  OneDnnSequenceConvBackward(const KernelDesc& desc, const dnnl::engine& engine,
                             std::unique_ptr<Kernel> packed_fallback)
      : desc_(desc),
        types_(operand_types(desc)),
        engine_(engine),
        stream_(engine),
        g_(desc, 1),
        fallback_(std::move(packed_fallback)),
        hint_(g_.forward(engine)),
        data_pd_(onednn::convolution_backward_data(engine, g_.src, g_.weights_any, g_.dst, g_.shape,
                                                   hint_)),
        weights_pd_(onednn::convolution_backward_weights(engine, g_.src, g_.weights_f32_any, g_.dst,
                                                         g_.shape, hint_)),
        data_(data_pd_),
        weights_(weights_pd_),
        read_weights_(engine, g_.weights, data_pd_.weights_desc(), true),
        write_weights_(engine, g_.weights_f32, weights_pd_.diff_weights_desc(), false),
        masked_x_(g_.src.get_size()),
        masked_dy_(g_.dst.get_size()),
        dw_step_(g_.weights_f32.get_size() / sizeof(float)) {}

  /// in: dY, X, W (at round_to), mask -> dX (at round_to), dW += (f32).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    if (packed(in[3])) return fallback_->run(in, out);
    const auto* mask = in[3].data<std::int32_t>();
    const std::int64_t rows = g_.a.batch * g_.a.seq;
    const std::size_t row = g_.row_bytes(in[0].dtype);
    // Outputs at padding positions were set to 0, so their gradient goes nowhere;
    // inputs at padding positions were zeroed, so they get none.
    copy_masked(in[0].buffer->data(), masked_dy_.data(), mask, rows, row);
    copy_masked(in[1].buffer->data(), masked_x_.data(), mask, rows, row);
    const dnnl::memory dy(g_.dst, engine_, masked_dy_.data());
    data_.execute(stream_,
                  {{DNNL_ARG_DIFF_DST, dy},
                   {DNNL_ARG_WEIGHTS, read_weights_.bind(stream_, in[2].buffer->data())},
                   {DNNL_ARG_DIFF_SRC, dnnl::memory(g_.src, engine_, out[0].buffer->data())}});
    weights_.execute(stream_,
                     {{DNNL_ARG_SRC, dnnl::memory(g_.src, engine_, masked_x_.data())},
                      {DNNL_ARG_DIFF_DST, dy},
                      {DNNL_ARG_DIFF_WEIGHTS, write_weights_.bind(stream_, dw_step_.data())}});
    write_weights_.finish(stream_);
    stream_.wait();
    zero_masked(out[0].buffer->data(), mask, rows, row);
    float* dw = out[1].data<float>();
    for (std::size_t i = 0; i < dw_step_.size(); ++i) dw[i] += dw_step_[i];
  }
  std::string implementation() const override {
    return "onednn sequence_conv_backward " + std::string(data_pd_.impl_info_str()) + " / " +
           std::string(weights_pd_.impl_info_str());
  }
  double flops() const override { return 2.0 * g_.flops(); }

 private:
  KernelDesc desc_;
  OperandTypes types_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  ConvGeometry g_;
  std::unique_ptr<Kernel> fallback_;
  dnnl::convolution_forward::primitive_desc hint_;
  dnnl::convolution_backward_data::primitive_desc data_pd_;
  dnnl::convolution_backward_weights::primitive_desc weights_pd_;
  dnnl::convolution_backward_data data_;
  dnnl::convolution_backward_weights weights_;
  WeightLayout read_weights_, write_weights_;
  std::vector<char> masked_x_, masked_dy_;
  std::vector<float> dw_step_;
};

void refuse_f16(const KernelDesc& desc) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
}

}  // namespace

std::unique_ptr<Kernel> make_onednn_sequence_conv(const KernelDesc& desc,
                                                  const dnnl::engine& engine,
                                                  std::unique_ptr<Kernel> packed_fallback) {
  refuse_f16(desc);
  return std::make_unique<OneDnnSequenceConv>(desc, engine, std::move(packed_fallback));
}

std::unique_ptr<Kernel> make_onednn_sequence_conv_backward(
    const KernelDesc& desc, const dnnl::engine& engine, std::unique_ptr<Kernel> packed_fallback) {
  refuse_f16(desc);
  return std::make_unique<OneDnnSequenceConvBackward>(desc, engine, std::move(packed_fallback));
}

}  // namespace polyhal::cpu
