// One GroupBERT pre-training step against the PyTorch reference model
// (tests/golden/make_groupbert_golden.py, groupbert_reference.py): the MLM
// and NSP losses and every gradient, without and with dropout (polyhal's
// masks), in f32 within 1e-4 relative, on the CPU and on the reference
// kernels the device models run.
#include <gtest/gtest.h>

#include "train_golden.hpp"

namespace polyhal {
namespace {

using test::expect_pytorch_step;
using test::TrainGolden;

std::filesystem::path groupbert_dir() {
  return test::golden_dir().parent_path() / "groupbert";
}

class GroupBertGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GroupBertGolden, LossAndEveryGradientMatchPyTorch) {
  const TrainGolden golden(groupbert_dir());
  ASSERT_EQ(golden.config.model_type, ModelType::groupbert);
  auto device = test::first_device(GetParam());
  BertTraining training(*device, golden.config, golden.shape, {});
  expect_pytorch_step(training, golden, golden.batch(), "");
}

TEST_P(GroupBertGolden, RecomputedLayersGiveTheSameGradients) {
  const TrainGolden golden(groupbert_dir());
  auto device = test::first_device(GetParam());
  BertTraining training(*device, golden.config, golden.shape, {.recompute = {0, 1}});
  expect_pytorch_step(training, golden, golden.batch(), "");
}

TEST_P(GroupBertGolden, WithDropoutTheSameMasksGiveTheSameGradients) {
  const TrainGolden golden(groupbert_dir());
  const auto& setting = golden.values.at("dropout.setting").values;  // seed, index, p, p
  auto device = test::first_device(GetParam());
  BertTraining training(*device, golden.config, golden.shape,
                        {.dropout = DropoutSettings{setting[2], setting[3]},
                         .seed = static_cast<std::uint64_t>(setting[0])});
  auto batch = golden.batch();
  batch.index = static_cast<std::uint64_t>(setting[1]);
  expect_pytorch_step(training, golden, batch, "dropout.", 5e-3);
}

TEST(GroupBertConfig, BadSettingsNameTheKey) {
  test::TempDir dir;
  const auto config = [&](const std::string& extra) {
    return dir.write("config.json", "{\"model_type\": \"" + extra +
                                        ", \"hidden_size\": 32, \"num_attention_heads\": 4, "
                                        "\"intermediate_size\": 48, \"num_hidden_layers\": 1}");
  };
  test::expect_config_error(
      [&] { read_hf_config(config("bert\", \"groupbert_conv_kernel_size\": 7")); },
      "key 'groupbert_conv_kernel_size': a GroupBERT setting in a \"bert\" model");
  test::expect_config_error(
      [&] { read_hf_config(config("groupbert\", \"groupbert_ffn_output_groups\": 5")); },
      "key 'groupbert_ffn_output_groups': 5 groups do not divide intermediate_size 48");
  test::expect_config_error(
      [&] { read_hf_config(config("groupbert\", \"groupbert_conv_group_size\": 5")); },
      "key 'groupbert_conv_group_size': 5 does not divide hidden_size 32");
  test::expect_config_error(
      [&] { read_hf_config(config("deberta-v2\"")); },
      "key 'model_type': expected one of \"bert\", \"groupbert\", \"roberta\", \"xlm-roberta\", "
      "\"camembert\", \"distilbert\", \"electra\", \"mpnet\", \"modernbert\", got \"deberta-v2\"");
  const auto gb = read_hf_config(config("groupbert\""));
  EXPECT_EQ(gb.layer_norm_eps, 1e-3) << "Graphcore's epsilon when the file gives none";
  EXPECT_EQ(gb.ffn_output_groups, 4);
  auto cpu = test::first_device("cpu");
  test::expect_config_error(
      [&] {
        BertTraining(*cpu, gb, BertShape{1, 5}, {});
      },
      "key 'groupbert_conv_kernel_size': a kernel of 7 positions is longer "
      "than the sequence length 5");
}

INSTANTIATE_TEST_SUITE_P(CpuAndDeviceModels, GroupBertGolden,
                         ::testing::Values("cpu", "ipu", "gaudi"));

}  // namespace
}  // namespace polyhal
