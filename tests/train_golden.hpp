#pragma once
// One training step's golden values written by a PyTorch script, and the
// comparison of polyhal's loss and every gradient with them (1e-4 relative).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/safetensors.hpp"
#include "test_support.hpp"

namespace polyhal::test {

/// A golden directory's model and one training step's values
/// (make_bert_train_golden.py, make_groupbert_golden.py).
struct TrainGolden {
  explicit TrainGolden(const std::filesystem::path& directory = golden_dir()) : dir(directory) {}
  std::filesystem::path dir;
  BertConfig config = read_hf_config(dir / "config.json");
  TensorMap weights = load_bert_weights(dir / "model.safetensors", config);
  TensorMap values = read_safetensors(dir / "train_golden.safetensors");
  BertShape shape{values.at("input_ids").shape[0], values.at("input_ids").shape[1]};

  std::vector<std::int32_t> ints(const std::string& name) const {
    return test::as_ints(values.at(name));
  }
  TrainingBatch batch() const {
    return {{ints("input_ids"), ints("token_type_ids"), ints("attention_mask")},
            ints("mlm_labels"),
            ints("nsp_labels")};
  }
};

/// |got - want| <= 1e-4 * max(|want|, 1e-3 * scale): 1e-4 relative, with a
/// floor for values that are rounding noise around an exact zero (the key
/// bias's gradient is mathematically 0: softmax ignores a shift of all scores).
/// `scale` is the largest magnitude in the whole golden set being compared;
/// `floor` the fraction of it below which values count as that noise.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                         const std::string& name, double scale, double floor = 1e-3) {
  ASSERT_EQ(got.size(), want.size()) << name;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tolerance = 1e-4 * std::max<double>(std::fabs(want[i]), floor * scale);
    ASSERT_NEAR(got[i], want[i], tolerance) << name << "[" << i << "]";
  }
}

/// One forward + backward of the golden batch on `training` gives PyTorch's
/// losses ("<prefix>loss") and every gradient ("<prefix>grad.<name>").
inline void expect_pytorch_step(BertTraining& training, const TrainGolden& golden,
                                const TrainingBatch& batch, const std::string& prefix,
                                double floor = 1e-3) {
  training.load_weights(golden.weights);
  const auto losses = training.forward_backward(batch);
  const auto& want = golden.values.at(prefix + "loss").values;
  EXPECT_NEAR(losses.mlm, want[0], 1e-4 * want[0]);
  EXPECT_NEAR(losses.nsp, want[1], 1e-4 * want[1]);
  const auto gradients = training.gradients();
  double scale = 0;
  for (const auto& [name, grad] : gradients) {
    for (float g : golden.values.at(prefix + "grad." + name).values)
      scale = std::max(scale, std::fabs(static_cast<double>(g)));
  }
  for (const auto& [name, grad] : gradients) {
    expect_close(grad.values, golden.values.at(prefix + "grad." + name).values, name, scale, floor);
  }
}

}  // namespace polyhal::test
