// Mixed precision as storage (train_kernels.hpp operand_types): the training
// program allocates what it plans, kernels refuse tensors of another dtype,
// and crafted labels are refused instead of indexing out of bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/pretrain_task.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

Tensor uploaded(Device& device, DType type, Shape shape, const void* values) {
  Tensor t = device.allocate_tensor(type, std::move(shape), "test");
  device.copy_from_host(*t.buffer, values, t.bytes());
  return t;
}

// The memory plan and the allocation come from the same tensor table: with
// bf16 the plan lists bf16 activations and compute copies, and loading the
// weights allocates exactly the bytes planned.
TEST(StoredPrecision, Bf16PlanIsWhatLoadingAllocates) {
  for (const std::string backend : {"cpu", "gaudi"}) {
    if (backend == "cpu" && test::cpu_without_bf16()) continue;  // gaudi keeps the check
    auto device = test::first_device(backend);
    const BertConfig config = bert_preset("tiny");
    BertTraining training(*device, config, {2, 32},
                          {.precision = DType::bf16, .dropout = {0.1, 0.1}, .max_predictions = 5});
    const MemoryReport plan = training.plan_memory();
    std::uint64_t planned = 0;
    bool bf16_activations = false, bf16_copy = false, host_items = false;
    for (const auto& item : plan.items) {
      // What the host itself holds (kernels' own memory, host copies, the
      // process) is planned on the CPU but never allocated on the device.
      if (item.category == "kernel memory" || item.category == "host" ||
          item.category == "process") {
        host_items = true;
        continue;
      }
      planned += item.bytes;
      bf16_activations |= item.category == "activations" && item.name == "bf16";
      bf16_copy |= item.category == "weights (compute copy)" && item.name == "bf16";
      if (item.category == "weights" || item.category == "optimizer state" ||
          item.category == "gradients") {
        EXPECT_EQ(item.name, "f32") << backend << " " << item.category;
      }
    }
    EXPECT_TRUE(bf16_activations) << backend;
    EXPECT_TRUE(bf16_copy) << backend;
    EXPECT_EQ(host_items, std::string(backend) == "cpu")
        << backend << ": host items on a device model";
    training.load_weights(init_bert_weights(config, 1));
    EXPECT_EQ(device->memory_stats().in_use_bytes, planned) << backend;
  }
}

// A kernel given an f32 tensor where its op stores bf16 names the op and
// the operand instead of reading the bytes as something else.
TEST(StoredPrecision, KernelRefusesTensorOfAnotherStorageType) {
  for (const std::string backend : {"cpu", "gaudi"}) {
    auto device = test::first_device(backend);
    if (const auto why = test::cpu_without_bf16(); why && backend == "cpu") {
      // Without AVX-512 the CPU refuses bf16 storage when preparing, by name.
      try {
        (void)device->prepare_kernel({OpKind::gelu, DType::f32, {{4, 8}}, NoAttrs{}, DType::bf16});
        ADD_FAILURE() << "bf16 storage was prepared on a CPU without bf16";
      } catch (const KernelNotFoundError& e) {
        EXPECT_NE(std::string(e.what()).find("bf16 storage and bf16 products need AVX-512"),
                  std::string::npos)
            << e.what();
      }
      continue;
    }
    KernelDesc desc{OpKind::gelu, DType::f32, {{4, 8}}, NoAttrs{}, DType::bf16};
    auto kernel = device->prepare_kernel(desc);
    const std::vector<float> values(32, 0.5f);
    const Tensor x = uploaded(*device, DType::f32, {4, 8}, values.data());
    const Tensor y = device->allocate_tensor(DType::bf16, {4, 8}, "y");
    try {
      kernel->run(std::array{x}, std::array{y});
      FAIL() << backend << ": an f32 input was accepted for bf16 storage";
    } catch (const RuntimeFailure& e) {
      EXPECT_NE(std::string(e.what()).find("gelu with round_to bf16: input 0 is a f32 tensor, the "
                                           "op stores it as bf16"),
                std::string::npos)
          << e.what();
    }
  }
}

// An MLM label outside the vocabulary (a crafted data file) is an error,
// on the CPU kernel and on the reference the device models run.
TEST(StoredPrecision, LossRefusesLabelOutsideTheVocabulary) {
  for (const char* backend : {"cpu", "ipu"}) {
    auto device = test::first_device(backend);
    const std::int64_t rows = 2, vocab = 5;
    KernelDesc desc{OpKind::pretraining_loss,
                    DType::f32,
                    {{rows, vocab}, {rows}, {1, 2}, {1}, {1}},
                    NoAttrs{},
                    DType::f32};
    auto kernel = device->prepare_kernel(desc);
    const std::vector<float> logits(rows * vocab, 0.1f), nsp(2, 0.2f), scale{1.0f};
    const std::vector<std::int32_t> labels{1, 7}, nsp_labels{0};
    const std::array in{uploaded(*device, DType::f32, {rows, vocab}, logits.data()),
                        uploaded(*device, DType::i32, {rows}, labels.data()),
                        uploaded(*device, DType::f32, {1, 2}, nsp.data()),
                        uploaded(*device, DType::i32, {1}, nsp_labels.data()),
                        uploaded(*device, DType::f32, {1}, scale.data())};
    const std::array out{device->allocate_tensor(DType::f32, {2}, "losses"),
                         device->allocate_tensor(DType::f32, {rows, vocab}, "dmlm"),
                         device->allocate_tensor(DType::f32, {1, 2}, "dnsp")};
    try {
      kernel->run(in, out);
      FAIL() << backend << ": label 7 of a 5-word vocabulary was accepted";
    } catch (const RuntimeFailure& e) {
      EXPECT_NE(std::string(e.what()).find("label 7 of row 1 is outside [0, 5)"), std::string::npos)
          << e.what();
    }
  }
}

/// Losses and the word-embedding gradient of one f16 micro-batch on an IPU
/// opened with device options `options`.
std::pair<StepLosses, std::vector<float>> ipu_f16_step(
    const std::map<std::string, std::string>& options) {
  auto ipu = test::first_device("ipu", options);
  const BertConfig config = bert_preset("tiny");
  const BertShape shape{2, 32};
  BertTraining training(*ipu, config, shape, {.precision = DType::f16, .max_predictions = 5});
  training.load_weights(init_bert_weights(config, 1));
  DataSection data;
  data.max_predictions = 5;
  const StepLosses losses =
      training.forward_backward(make_pretraining_batch(config, shape, data, 0), 1, 1024.0);
  return {losses,
          training.gradients().at("bert.encoder.layer.0.attention.self.query.weight").values};
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

// The IPU's f16 partials and stochastic rounding reach the training ops:
// each changes the step's gradients (a little), the same options give the
// same bits twice, and everything stays finite.
TEST(StoredPrecision, IpuNumericsApplyToTrainingOps) {
  const auto plain = ipu_f16_step({});
  const auto again = ipu_f16_step({});
  const auto partials = ipu_f16_step({{"partials", "f16"}});
  const auto rounding = ipu_f16_step({{"stochastic_rounding", "true"}});
  EXPECT_EQ(plain.second, again.second);
  EXPECT_EQ(plain.first.total(), again.first.total());
  double scale = 0;
  for (float g : plain.second) scale = std::max(scale, std::abs(static_cast<double>(g)));
  ASSERT_GT(scale, 0.0);
  for (const auto* other : {&partials, &rounding}) {
    const double diff = max_difference(plain.second, other->second);
    EXPECT_GT(diff, 0.0) << "the device option changed nothing in training";
    EXPECT_LT(diff, 0.1 * scale);
    EXPECT_TRUE(std::isfinite(other->first.total()));
    EXPECT_NEAR(other->first.total(), plain.first.total(), 0.05);
  }
}

}  // namespace
}  // namespace polyhal
