// Graphcore's TensorFlow GroupBERT checkpoints
// (tests/data/tf_checkpoint/make_groupbert_tf_checkpoint.py wrote them with
// TensorFlow 2.21 from a transcript of Graphcore's GroupBertModel, in both
// attention layouts its configs use): polyhal reads their names and layouts,
// and the model it builds computes what TensorFlow computed, on every backend.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/convert_model.hpp"
#include "polyhal/app/tf_bert_weights.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kData =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/tf_checkpoint/groupbert";

/// The largest difference over the real tokens' rows (`width` values per
/// token); padding tokens' rows are not compared (docs/groupbert.md: polyhal
/// gives them 0 from the convolution, Graphcore their neighbours' sum, and
/// nothing downstream reads them).
double max_error_on_tokens(const std::vector<float>& got, const std::vector<float>& want,
                           const std::vector<int32_t>& mask, std::size_t width) {
  EXPECT_EQ(got.size(), want.size());
  EXPECT_EQ(got.size(), mask.size() * width);
  double worst = 0;
  for (std::size_t t = 0; t < mask.size() && (t + 1) * width <= got.size(); ++t) {
    if (mask[t] == 0) continue;
    for (std::size_t i = t * width; i < (t + 1) * width; ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return worst;
}

class GroupBertTfCheckpoint : public ::testing::TestWithParam<const char*> {
 protected:
  std::filesystem::path dir() const { return kData / GetParam(); }
  std::filesystem::path checkpoint() const { return dir() / "model.ckpt-3"; }
};

TEST_P(GroupBertTfCheckpoint, GraphcoresConfigReadsAsGroupBert) {
  const auto config = read_hf_config(dir() / "bert_config.json");
  EXPECT_EQ(config.model_type, ModelType::groupbert);
  EXPECT_EQ(config.ffn_output_groups, 4);
  EXPECT_EQ(config.conv_group_size, 8);
  EXPECT_EQ(config.conv_kernel_size, 5);
  EXPECT_EQ(config.layer_norm_eps, 1e-3);  // Graphcore's layer_norm
}

TEST_P(GroupBertTfCheckpoint, TheModelComputesWhatTensorFlowComputesFromIt) {
  const auto config = read_hf_config(dir() / "bert_config.json");
  const auto reference = read_safetensors(dir() / "reference.safetensors");
  const BertShape shape{reference.at("input_ids").shape[0], reference.at("input_ids").shape[1]};
  const auto mask = test::as_ints(reference.at("attention_mask"));
  const auto weights = load_bert_weights(checkpoint(), config);
  for (const std::string backend : {"cpu", "ipu", "gaudi"}) {
    SCOPED_TRACE(backend);
    auto device = test::first_device(backend);
    BertInference bert(*device, config, shape, DType::f32, /*with_heads=*/true);
    bert.load_weights(weights);
    BertOutputs out;
    bert.run({test::as_ints(reference.at("input_ids")),
              test::as_ints(reference.at("token_type_ids")), mask},
             &out);
    const auto hidden = static_cast<std::size_t>(config.hidden_size);
    const auto vocab = static_cast<std::size_t>(config.vocab_size);
    EXPECT_LE(max_error_on_tokens(out.last_hidden_state, reference.at("last_hidden_state").values,
                                  mask, hidden),
              1e-4);
    EXPECT_LE(max_error_on_tokens(out.mlm_logits, reference.at("mlm_logits").values, mask, vocab),
              1e-3);
    const auto& nsp = reference.at("nsp_logits").values;
    ASSERT_EQ(out.nsp_logits.size(), nsp.size());
    for (std::size_t i = 0; i < nsp.size(); ++i) EXPECT_NEAR(out.nsp_logits[i], nsp[i], 1e-4);
  }
}

TEST_P(GroupBertTfCheckpoint, ConvertWritesAGroupBertDirectoryWithTheSameWeights) {
  test::TempDir out;
  ConvertOptions options;
  options.input = checkpoint();
  options.output = out.path() / "hf";
  const auto result = convert_tf_to_hf(options);
  const auto config = read_hf_config(options.output / "config.json");
  EXPECT_EQ(config.model_type, ModelType::groupbert);
  EXPECT_EQ(config.conv_kernel_size, 5);
  const auto converted = read_safetensors(options.output / "model.safetensors");
  const auto direct = canonical_bert_weights(read_tf_bert_weights(checkpoint()));
  EXPECT_EQ(converted.size(), direct.size());
  EXPECT_EQ(converted.at("bert.encoder.layer.1.convolution.conv.weight").shape, (Shape{32, 8, 5}));
  EXPECT_EQ(converted.at("bert.encoder.final_norm.weight").values,
            direct.at("bert.encoder.final_norm.weight").values);
  EXPECT_EQ(result.training_state.size(), std::string(GetParam()) == "lamb" ? 91u : 1u);
}

INSTANTIATE_TEST_SUITE_P(GraphcoreLayouts, GroupBertTfCheckpoint,
                         ::testing::Values("lamb", "adam"));

TEST(GroupBertTfCheckpoint, OptimizerMomentsAreLaidOutAsTheWeights) {
  const auto state = read_tf_optimizer_state(kData / "lamb/model.ckpt-3");
  EXPECT_EQ(state.global_step, 3);
  EXPECT_EQ(state.m.at("bert.encoder.layer.0.convolution.conv.weight").shape, (Shape{32, 8, 5}));
  EXPECT_EQ(state.m.at("bert.encoder.layer.0.feed_forward_2.output.weight").shape, (Shape{32, 16}));
  EXPECT_TRUE(state.m.contains("bert.encoder.final_norm.bias"));
}

TEST(GroupBertTfCheckpoint, AGroupbertFlagThatIsNotABooleanOrContradictsModelTypeNamesTheKey) {
  test::TempDir dir;
  const auto file = dir.path() / "bert_config.json";
  std::ofstream(file) << R"({"hidden_size": 32, "groupbert": "yes"})";
  try {
    read_hf_config(file);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'groupbert': expected true or false"),
              std::string::npos)
        << e.what();
  }
  std::ofstream(file) << R"({"groupbert": true, "model_type": "bert"})";
  try {
    read_hf_config(file);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'model_type' says \"bert\""), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace polyhal
