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
  ASSERT_TRUE(golden.config.groupbert());
  auto device = test::first_device(GetParam());
  BertTraining training(*device, golden.config, golden.shape, {});
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

INSTANTIATE_TEST_SUITE_P(CpuAndDeviceModels, GroupBertGolden,
                         ::testing::Values("cpu", "ipu", "gaudi"));

}  // namespace
}  // namespace polyhal
