// The fine-tuning heads against PyTorch (tests/golden/make_bert_finetune_golden.py,
// f64): question answering, classification and regression, the loss and
// every gradient and the weights after one AdamW step within 1e-4 in f32, on
// every backend.
#include <gtest/gtest.h>

#include <cmath>

#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

struct FinetuneGolden {
  BertConfig config = read_hf_config(test::golden_dir() / "config.json");
  TensorMap values = read_safetensors(test::golden_dir() / "finetune_golden.safetensors");
  BertShape shape{values.at("input_ids").shape[0], values.at("input_ids").shape[1]};

  std::vector<std::int32_t> ints(const std::string& name) const {
    return test::as_ints(values.at(name));
  }
  /// The encoder's weights plus head `head`'s, under Hugging Face names.
  TensorMap weights(const std::string& head) const {
    TensorMap out;
    for (const auto& [name, tensor] : values) {
      if (name.starts_with("weights.bert.") || name.starts_with("weights.cls.predictions") ||
          name.starts_with("weights.cls.seq_relationship")) {
        out[name.substr(8)] = tensor;
      } else if (name.starts_with("weights." + head + ".")) {
        out[name.substr(9 + head.size())] = tensor;
      }
    }
    return out;
  }
  TrainingBatch batch() const {
    TrainingBatch b;
    b.inputs = {ints("input_ids"), ints("token_type_ids"), ints("attention_mask")};
    b.start_positions = ints("qa.start_positions");
    b.end_positions = ints("qa.end_positions");
    b.labels = ints("cls.labels");
    b.targets = values.at("reg.targets").values;
    return b;
  }
};

/// |got - want| <= 1e-4 * the tensor's largest |want| (and at least
/// 1e-4 * 1e-2 * `scale`, the largest gradient of the head): 1e-4 relative
/// to each tensor's scale. Elementwise relative error is not the measure:
/// a head's gradients reach the encoder's first layers as small sums of
/// larger cancelling terms, whose f32 rounding is that of the terms; and a
/// gradient that is exactly 0 in f64 (the start/end bias: softmax ignores a
/// shift of every logit) comes out as the f32 rounding of 1 - 1.
void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& name, double scale) {
  ASSERT_EQ(got.size(), want.size()) << name;
  double largest = 0;
  for (float w : want) largest = std::max(largest, std::fabs(static_cast<double>(w)));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tolerance = 1e-4 * std::max(largest, 1e-2 * scale);
    ASSERT_NEAR(got[i], want[i], tolerance) << name << "[" << i << "]";
  }
}

struct HeadCase {
  const char* golden;  // qa, cls, reg
  TaskHead head;
};

class FinetuneGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FinetuneGoldenTest, LossEveryGradientAndOneAdamWStepMatchPyTorch) {
  const FinetuneGolden golden;
  auto device = test::first_device(GetParam());
  for (const HeadCase& c : {HeadCase{"qa", {TaskHead::Kind::question_answering, 2, {}}},
                            HeadCase{"cls", {TaskHead::Kind::classification, 3, {}}},
                            HeadCase{"reg", {TaskHead::Kind::classification, 1, {}}}}) {
    SCOPED_TRACE(c.golden);
    OptimizerSettings adamw;
    adamw.kind = "adamw";
    BertTraining training(*device, golden.config, golden.shape,
                          {.optimizer = adamw, .head = c.head});
    training.load_weights(golden.weights(c.golden));
    const StepLosses losses = training.forward_backward(golden.batch());
    const double want = golden.values.at(std::string(c.golden) + ".loss").values[0];
    EXPECT_NEAR(losses.total(), want, 1e-4 * std::max(1.0, std::fabs(want)));
    const TensorMap grads = training.gradients();
    double scale = 0;
    std::size_t compared = 0;
    const std::string prefix = std::string(c.golden) + ".grad.";
    for (const auto& [name, tensor] : golden.values) {
      if (!name.starts_with(prefix)) continue;
      for (float g : tensor.values) scale = std::max(scale, std::fabs(static_cast<double>(g)));
    }
    for (const auto& [name, tensor] : golden.values) {
      if (!name.starts_with(prefix)) continue;
      const std::string param = name.substr(prefix.size());
      ASSERT_TRUE(grads.contains(param)) << "polyhal has no parameter " << param;
      expect_close(grads.at(param).values, tensor.values, param, scale);
      ++compared;
    }
    // Every parameter of the program has a golden gradient, and no other.
    EXPECT_EQ(compared, grads.size());
    // One AdamW step (lr 1e-3, OptimizerSettings' defaults as the script's).
    training.optimizer_step(1e-3);
    std::size_t stepped = 0;
    for (const auto& [name, w] : training.weights()) {
      const auto stepped_want = golden.values.find(std::string(c.golden) + ".adamw." + name);
      ASSERT_NE(stepped_want, golden.values.end()) << "no PyTorch step for " << name;
      expect_close(w.values, stepped_want->second.values, name, 1.0);
      ++stepped;
    }
    EXPECT_EQ(stepped, grads.size());
  }
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, FinetuneGoldenTest,
                         ::testing::Values("cpu", "ipu", "gaudi"));

}  // namespace
}  // namespace polyhal
