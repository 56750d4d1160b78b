// Recomputation (model.recompute): backward runs a layer's forward ops again
// instead of keeping their activations. The loss, every gradient and the
// weights after a step are exactly those of the program that keeps them
// (dropout on: the masks are regenerated from their streams), on every
// backend, and the memory plan keeps one layer's intermediates, not all.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

std::uint64_t activation_bytes(const MemoryReport& report) {
  std::uint64_t bytes = 0;
  for (const auto& item : report.items)
    if (item.category == "activations") bytes += item.bytes;
  return bytes;
}

class RecomputeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RecomputeTest, SameLossGradientsAndStepAsKeepingActivations) {
  auto device = test::first_device(GetParam());
  const BertConfig config = test::small_bert(3);
  const BertShape shape{4, 16};
  const DataSection data = test::pattern_data();
  OptimizerSettings adamw;
  adamw.kind = "adamw";
  const DropoutSettings dropout{0.1, 0.1};
  const auto weights = init_bert_weights(config, 5);
  const auto train = [&](std::set<std::int64_t> recompute) {
    auto model =
        std::make_unique<BertTraining>(*device, config, shape,
                                       BertTrainingOptions{.optimizer = adamw,
                                                           .dropout = dropout,
                                                           .seed = 7,
                                                           .max_predictions = 3,
                                                           .recompute = std::move(recompute)});
    model->load_weights(weights);
    return model;
  };
  auto kept = train({}), recomputed = train({0, 1, 2}), some = train({1});
  for (std::uint64_t micro = 0; micro < 2; ++micro) {
    const TrainingBatch batch = make_pretraining_batch(config, shape, data, micro);
    const StepLosses a = kept->forward_backward(batch, 2);
    const StepLosses b = recomputed->forward_backward(batch, 2);
    const StepLosses c = some->forward_backward(batch, 2);
    EXPECT_EQ(a.mlm, b.mlm);
    EXPECT_EQ(a.nsp, b.nsp);
    EXPECT_EQ(a.mlm, c.mlm);
  }
  const TensorMap ga = kept->gradients(), gb = recomputed->gradients(), gc = some->gradients();
  ASSERT_EQ(ga.size(), gb.size());
  for (const auto& [name, g] : ga) {
    EXPECT_EQ(g.values, gb.at(name).values) << name;
    EXPECT_EQ(g.values, gc.at(name).values) << name;
  }
  kept->optimizer_step(1e-3);
  recomputed->optimizer_step(1e-3);
  const TensorMap wa = kept->weights(), wb = recomputed->weights();
  for (const auto& [name, w] : wa) EXPECT_EQ(w.values, wb.at(name).values) << name;

  // Memory: fewer activations with every layer recomputed than with one,
  // fewer with one than with none.
  const auto none = activation_bytes(kept->plan_memory());
  const auto one = activation_bytes(some->plan_memory());
  const auto all = activation_bytes(recomputed->plan_memory());
  EXPECT_LT(one, none);
  EXPECT_LT(all, one);
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, RecomputeTest, ::testing::Values("cpu", "ipu", "gaudi"));

TEST(Recompute, BertLargeKeepsOneLayerOfIntermediatesAndCostsOneMoreForward) {
  test::TempDir dir;
  const auto metrics = [&](const std::string& name, const std::string& sets) {
    const auto file = dir.path() / (name + ".jsonl");
    const auto r = test::run_polyhal(
        fmt::format("run --compile-only --config {}/configs/pretrain-bert-large-phase1-gaudi.yaml "
                    "--metrics-out {} {}",
                    POLYHAL_SOURCE_DIR, file.string(), sets));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return test::last_json_line(file);
  };
  const auto kept = metrics("kept", "");
  const auto all = metrics("all", "--set model.recompute=all");
  EXPECT_LT(all["memory_required_bytes"].get<double>(),
            0.6 * kept["memory_required_bytes"].get<double>());
  const auto& k = kept["estimated_step_seconds"];
  const auto& a = all["estimated_step_seconds"];
  EXPECT_DOUBLE_EQ(a["forward"].get<double>(), k["forward"].get<double>());
  // Backward gains the encoder's forward again (not the embeddings and heads).
  EXPECT_GT(a["backward"].get<double>(),
            k["backward"].get<double>() + 0.8 * k["forward"].get<double>());
  EXPECT_LT(a["backward"].get<double>(), k["backward"].get<double>() + k["forward"].get<double>());
}

TEST(Recompute, ALayerTheModelDoesNotHaveNamesTheKey) {
  const std::string config = " --config " + std::string(POLYHAL_SOURCE_DIR) +
                             "/configs/pretrain-bert-base-phase1-gaudi.yaml";
  auto r = test::run_polyhal("run --compile-only" + config + " --set 'model.recompute=[3, 12]'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--set model.recompute=[3, 12]: key 'model.recompute': layer 12 does not "
                          "exist: the model has 12 layers (0-11)"),
            std::string::npos)
      << r.output;
  r = test::run_polyhal("validate" + config + " --set model.recompute=some");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected none, all or a list of layer numbers"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace polyhal
