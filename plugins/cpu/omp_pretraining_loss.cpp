// pretraining_loss on the CPU (train_kernels.hpp): MLM and NSP cross-entropy
// with their logit gradients, on f32 or bf16 storage, on the OpenMP pool.
// Each element's exponential is computed once, in f32 (the reference takes
// two in double), and kept in a per-thread row until the row's sum is known;
// the sums, the losses and the mean stay in double. Labels are checked:
// one outside [0, classes) other than -100 is an error, not a read out of
// bounds.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "omp_convert.hpp"
#include "onednn_matmul.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

constexpr std::int32_t kIgnored = -100;

class OmpPretrainingLoss final : public Kernel {
 public:
  explicit OmpPretrainingLoss(const KernelDesc& desc)
      : desc_(desc),
        types_(operand_types(desc)),
        tokens_(desc.input_shapes.at(0).at(0)),
        vocab_(desc.input_shapes.at(0).at(1)),
        batch_(desc.input_shapes.at(2).at(0)) {}

  /// in: mlm logits, mlm labels, nsp logits, nsp labels, loss scale ->
  /// losses [2] (f32), dmlm, dnsp (stored at round_to).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    const float scale = in[4].data<float>()[0];
    out[0].data<float>()[0] = static_cast<float>(
        cross_entropy(in[0], in[1].data<std::int32_t>(), tokens_, vocab_, out[1], scale, "mlm"));
    out[0].data<float>()[1] = static_cast<float>(
        cross_entropy(in[2], in[3].data<std::int32_t>(), batch_, 2, out[2], scale, "nsp"));
  }
  std::string implementation() const override { return "omp pretraining_loss"; }

 private:
  double cross_entropy(const Tensor& logits, const std::int32_t* labels, std::int64_t count,
                       std::int64_t classes, const Tensor& dlogits, float scale, const char* what) {
    std::int64_t counted = 0;
    for (std::int64_t i = 0; i < count; ++i) {
      if (labels[i] == kIgnored) continue;
      if (labels[i] < 0 || labels[i] >= classes) {
        throw RuntimeFailure(fmt::format("{} label {} of row {} is outside [0, {}) (or -100)", what,
                                         labels[i], i, classes));
      }
      ++counted;
    }
    row_loss_.assign(static_cast<std::size_t>(count), 0.0);
    if (logits.dtype == DType::bf16) {
      rows(logits.data<std::uint16_t>(), labels, count, classes, dlogits.data<std::uint16_t>(),
           scale, counted);
    } else {
      rows(logits.data<float>(), labels, count, classes, dlogits.data<float>(), scale, counted);
    }
    double loss = 0;
    for (double l : row_loss_) loss += l;
    return counted == 0 ? 0.0 : loss / static_cast<double>(counted);
  }

  template <class T>
  void rows(const T* logits, const std::int32_t* labels, std::int64_t count, std::int64_t classes,
            T* dlogits, float scale, std::int64_t counted) {
    const auto per_thread = static_cast<std::size_t>(classes);
    exps_.resize(static_cast<std::size_t>(omp_get_max_threads()) * per_thread);
#pragma omp parallel for schedule(dynamic, 4)
    for (std::int64_t i = 0; i < count; ++i) {
      const T* row = logits + i * classes;
      T* drow = dlogits + i * classes;
      if (labels[i] == kIgnored || counted == 0) {
        for (std::int64_t c = 0; c < classes; ++c) store_f32(drow, c, 0.0f);
        continue;
      }
      float* e = exps_.data() + static_cast<std::size_t>(omp_get_thread_num()) * per_thread;
      float max_logit = load_f32(row, 0);
      for (std::int64_t c = 1; c < classes; ++c) max_logit = std::max(max_logit, load_f32(row, c));
      double total = 0;
      for (std::int64_t c = 0; c < classes; ++c) {
        e[c] = std::exp(load_f32(row, c) - max_logit);
        total += e[c];
      }
      row_loss_[static_cast<std::size_t>(i)] =
          std::log(total) + max_logit - load_f32(row, labels[i]);
      const double factor = static_cast<double>(scale) / static_cast<double>(counted);
      const auto p_scale = static_cast<float>(factor / total);
      for (std::int64_t c = 0; c < classes; ++c) store_f32(drow, c, e[c] * p_scale);
      store_f32(drow, labels[i],
                static_cast<float>((static_cast<double>(e[labels[i]]) / total - 1.0) * factor));
    }
  }

  KernelDesc desc_;
  OperandTypes types_;
  std::int64_t tokens_, vocab_, batch_;
  std::vector<double> row_loss_;
  std::vector<float> exps_;
};

}  // namespace

std::unique_ptr<Kernel> make_omp_pretraining_loss(const KernelDesc& desc) {
  if (round_type(desc) == DType::f16)
    throw KernelNotFoundError("cpu: no f16 training; use bf16 or f32");
  return std::make_unique<OmpPretrainingLoss>(desc);
}

}  // namespace polyhal::cpu
