// Mixed-precision storage of the training ops: which operand is stored at
// round_to (operand_types), and the adapter that runs an f32 kernel on that
// storage (with_stored_precision), which is how the reference kernels, and
// the CPU kernels without a native bf16 path, meet bf16/f16 tensors.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/reference_gemm.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal {

OperandTypes operand_types(const KernelDesc& desc) {
  const DType low = desc.round_to, f = DType::f32, i = DType::i32;
  const DType t = desc.dtype;
  switch (desc.op) {
    // Inference ops compute in their dtype (constants are not operands).
    case OpKind::matmul:
      return {{t, t}, {desc.out_dtype()}, {}};
    case OpKind::linear:
    case OpKind::layernorm:
      return {{t, t}, {t}, {}};  // the second input: the fused residual
    case OpKind::attention:
      return {{t, i}, {t}, {}};
    case OpKind::relative_attention:
      return {{t, i, i}, {t}, {}};
    case OpKind::embedding:  // [, position ids]
      return {{i, i, i}, {t}, {}};
    case OpKind::take_rows:
      return {{t}, {t}, {}};
    case OpKind::dense:
      return {{low, low, f}, {low}, {}};
    case OpKind::dense_backward:
      return {{low, low, low}, {low, f, f}, {1, 2}};
    case OpKind::gelu:
    case OpKind::tanh:
    case OpKind::relu:
      return {{low}, {low}, {}};
    case OpKind::gelu_backward:
    case OpKind::tanh_backward:
    case OpKind::relu_backward:
    case OpKind::add:
      return {{low, low}, {low}, {}};
    case OpKind::layernorm_train:
      return {{low, f, f}, {low, f, f}, {}};
    case OpKind::layernorm_backward:
      return {{low, low, f, f, f}, {low, f, f}, {1, 2}};
    case OpKind::attention_train:
      return {{low, i, i}, {low, low}, {}};
    case OpKind::attention_backward:  // [, rng], mask
      return {{low, low, low, i, i}, {low}, {}};
    case OpKind::embedding_train:  // [, position ids]
      return {{i, i, f, f, f, i}, {low}, {}};
    case OpKind::embedding_backward:  // [, position ids]
      return {{low, i, i, i}, {f, f, f}, {0, 1, 2}};
    case OpKind::take_rows_backward:
      return {{low}, {low}, {0}};
    case OpKind::gather_rows:
    case OpKind::gather_rows_backward:
    case OpKind::dropout:
    case OpKind::dropout_backward:
      return {{low, i}, {low}, {}};
    case OpKind::pretraining_loss:
      return {{low, i, low, i, f}, {f, low, low}, {}};
    case OpKind::sum_of_squares:
      return {{f}, {f}, {}};
    case OpKind::adamw_update:
    case OpKind::lamb_update:
    case OpKind::sgd_update: {
      const DType m = desc.attrs_as<OptimizerUpdateAttrs>().first_moment;
      return {{f, f, m, f, DType::i64}, {f, m, f, f, low}, {}};
    }
    case OpKind::cast:
      return {{f}, {low}, {}};
    case OpKind::span_loss:  // [, mask: packed rows]
      return {{low, i, f, i}, {f, low}, {}};
    case OpKind::classification_loss:
      return {{low, i, f}, {f, low}, {}};
    case OpKind::regression_loss:
      return {{low, f, f}, {f, low}, {}};
    case OpKind::grouped_dense:
      return {{low, low, f}, {low}, {}};
    case OpKind::grouped_dense_backward:
      return {{low, low, low}, {low, f, f}, {1, 2}};
    case OpKind::sequence_conv:
      return {{low, low, i}, {low}, {}};
    case OpKind::sequence_conv_backward:
      return {{low, low, low, i}, {low, f}, {1}};
    case OpKind::glu:
    case OpKind::swish:
      return {{low}, {low}, {}};
    case OpKind::glu_backward:
    case OpKind::swish_backward:
    case OpKind::geglu_backward:
      return {{low, low}, {low}, {}};
    case OpKind::geglu:
      return {{low}, {low}, {}};
    case OpKind::mean_pool:
    case OpKind::mean_pool_backward:
      return {{low, i}, {low}, {}};
    case OpKind::rotary:  // [, position ids]
    case OpKind::rotary_backward:
      return {{low, i}, {low}, {}};
    case OpKind::relative_attention_train:  // [, rng]
      return {{low, i, i, f, i}, {low, low}, {}};
    case OpKind::relative_attention_backward:  // [, rng], mask
      return {{low, low, low, i, i, i}, {low, f}, {1}};
    default:
      throw std::invalid_argument(
          fmt::format("operand_types: {} runs no kernel", op_name(desc.op)));
  }
}

namespace {

void check_tensors(const KernelDesc& desc, std::span<const Tensor> tensors,
                   const std::vector<DType>& expected, const char* what) {
  if (tensors.size() > expected.size()) {
    throw RuntimeFailure(fmt::format("{}: {} {}s, at most {} expected", op_name(desc.op),
                                     tensors.size(), what, expected.size()));
  }
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    if (tensors[k].dtype != expected[k]) {
      throw RuntimeFailure(fmt::format(
          "{} with round_to {}: {} {} is a {} tensor, the op stores it as {} (operand_types)",
          op_name(desc.op), dtype_name(desc.round_to), what, k, dtype_name(tensors[k].dtype),
          dtype_name(expected[k])));
    }
  }
}

bool is_low(DType type) {
  return type == DType::bf16 || type == DType::f16;
}

/// Host memory owned elsewhere (the adapter's scratch), seen as a Buffer.
class ScratchBuffer final : public Buffer {
 public:
  ScratchBuffer(void* data, std::uint64_t bytes) : data_(data), bytes_(bytes) {}
  void* data() noexcept override { return data_; }
  const void* data() const noexcept override { return data_; }
  std::uint64_t size_bytes() const noexcept override { return bytes_; }

 private:
  void* data_;
  std::uint64_t bytes_;
};

Tensor scratch_tensor(std::vector<float>& storage, const Tensor& like) {
  storage.resize(static_cast<std::size_t>(like.numel()));
  return {std::make_shared<ScratchBuffer>(storage.data(), storage.size() * sizeof(float)),
          DType::f32, like.shape};
}

class StoredPrecision final : public Kernel {
 public:
  StoredPrecision(std::unique_ptr<Kernel> inner, const KernelDesc& desc, ParallelFor parallel,
                  MatMulNumerics numerics)
      : inner_(std::move(inner)),
        desc_(desc),
        low_(desc.round_to),
        types_(operand_types(desc)),
        parallel_(std::move(parallel)),
        numerics_(numerics) {}

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    check_operand_types(desc_, types_, inputs, outputs);
    std::vector<Tensor> in(inputs.begin(), inputs.end()), out(outputs.begin(), outputs.end());
    scratch_.resize(inputs.size() + 2 * outputs.size());
    std::size_t next = 0;
    for (std::size_t k = 0; k < in.size(); ++k) {
      if (!is_low(in[k].dtype)) continue;
      in[k] = scratch_tensor(scratch_[next++], inputs[k]);
      widen(inputs[k], in[k].data<float>());
    }
    // An output updated in place (the optimizer's m) starts from its input's
    // widened values, and the kernel sees one tensor for both.
    std::vector<bool> in_place(out.size(), false);
    for (std::size_t k = 0; k < out.size(); ++k) {
      if (!is_low(out[k].dtype)) continue;
      for (std::size_t j = 0; j < in.size(); ++j) {
        if (inputs[j].buffer == outputs[k].buffer && is_low(inputs[j].dtype)) {
          out[k] = in[j];
          in_place[k] = true;
        }
      }
    }
    // An accumulated output's old value is kept apart and the op computes
    // its contribution from zero, so that the contribution can be rounded.
    std::vector<const float*> old(out.size(), nullptr);
    for (std::size_t k = 0; k < out.size(); ++k) {
      const bool accumulated = listed(k);
      if (in_place[k] || (!is_low(outputs[k].dtype) && !accumulated)) continue;
      if (accumulated) {
        auto& saved = scratch_[next++];
        saved.resize(static_cast<std::size_t>(outputs[k].numel()));
        widen(outputs[k], saved.data());
        old[k] = saved.data();
      }
      if (is_low(out[k].dtype)) out[k] = scratch_tensor(scratch_[next++], outputs[k]);
      if (accumulated) std::fill_n(out[k].data<float>(), out[k].numel(), 0.0f);
    }
    inner_->run(in, out);
    for (std::size_t k = 0; k < out.size(); ++k) {
      float* v = out[k].data<float>();
      if (const float* before = old[k]) {
        parallel_(out[k].numel(), [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t e = begin; e < end; ++e) v[e] = before[e] + round_through(low_, v[e]);
        });
      }
      if (is_low(outputs[k].dtype)) narrow(v, outputs[k]);
    }
    ++runs_;
  }
  std::string implementation() const override {
    return inner_->implementation() + " (stored in " + std::string(dtype_name(low_)) + ")";
  }
  double flops() const override { return inner_->flops(); }
  std::uint64_t workspace_bytes() const override { return inner_->workspace_bytes(); }

 private:
  bool listed(std::size_t output) const {
    return std::find(types_.accumulated.begin(), types_.accumulated.end(), output) !=
           types_.accumulated.end();
  }
  void widen(const Tensor& from, float* to) const {
    const auto size = dtype_size(from.dtype);
    const auto* bytes = static_cast<const std::byte*>(from.buffer->data());
    parallel_(from.numel(), [&](std::int64_t begin, std::int64_t end) {
      convert(bytes + static_cast<std::size_t>(begin) * size, from.dtype, to + begin, DType::f32,
              static_cast<std::size_t>(end - begin));
    });
  }
  void narrow(const float* from, const Tensor& to) const {
    if (numerics_.stochastic_rounding && to.dtype == DType::f16) {  // one counter-based stream
      detail::store_rounded(from, to.buffer->data(), to.dtype, static_cast<std::size_t>(to.numel()),
                            numerics_, runs_ * 64 + static_cast<std::uint64_t>(desc_.op));
      return;
    }
    const auto size = dtype_size(to.dtype);
    auto* bytes = static_cast<std::byte*>(to.buffer->data());
    parallel_(to.numel(), [&](std::int64_t begin, std::int64_t end) {
      convert(from + begin, DType::f32, bytes + static_cast<std::size_t>(begin) * size, to.dtype,
              static_cast<std::size_t>(end - begin));
    });
  }

  std::unique_ptr<Kernel> inner_;
  KernelDesc desc_;
  DType low_;
  OperandTypes types_;
  ParallelFor parallel_;
  MatMulNumerics numerics_;
  std::uint64_t runs_ = 0;  // calls so far: the stochastic rounding stream of each
  std::vector<std::vector<float>> scratch_;
};

}  // namespace

void check_operand_types(const KernelDesc& desc, const OperandTypes& types,
                         std::span<const Tensor> inputs, std::span<const Tensor> outputs) {
  check_tensors(desc, inputs, types.inputs, "input");
  check_tensors(desc, outputs, types.outputs, "output");
}

std::unique_ptr<Kernel> with_stored_precision(std::unique_ptr<Kernel> f32_kernel,
                                              const KernelDesc& desc, ParallelFor parallel,
                                              MatMulNumerics numerics) {
  const OperandTypes types = operand_types(desc);
  bool low = false;
  for (const auto& list : {types.inputs, types.outputs})
    for (const DType type : list) low = low || is_low(type);
  if (!low) return f32_kernel;
  if (!parallel) parallel = tbb_parallel_for();
  return std::make_unique<StoredPrecision>(std::move(f32_kernel), desc, std::move(parallel),
                                           numerics);
}

}  // namespace polyhal
