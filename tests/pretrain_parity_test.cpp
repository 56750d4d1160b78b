// Pre-training trains as Hugging Face transformers does: the short version
// of bench/pretrain_parity (docs/pretraining.md). The same real prose
// (Debian 12's licence texts, committed in tests/data/licence_prose), vocabulary
// (bert-base-uncased), masking (polyhal prepare-data), initial weights, batches, schedule and LAMB,
// dropout off: every step's loss and the held-out evaluations against transformers'
// (tests/golden/make_pretrain_parity_golden.py).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kModel = POLYHAL_REAL_MODEL_DIR;
const std::filesystem::path kLicenses =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/licence_prose";

TEST(PretrainParity, ShortRunFollowsTheTransformersCurve) {
  if (!std::filesystem::exists(kModel / "vocab.txt")) {
    ADD_FAILURE() << "the real model's vocabulary is missing at " << kModel.string()
                  << ": run scripts/fetch-real-model.sh (scripts/test.sh and .ci/run do)";
    return;
  }
  nlohmann::json golden;
  std::ifstream(std::filesystem::path(POLYHAL_SOURCE_DIR) /
                "tests/golden/pretrain_parity_short.json") >>
      golden;
  test::TempDir dir;
  std::string train;
  for (const auto& name : golden["train_licenses"])
    train += " --input " + (kLicenses / name.get<std::string>()).string();
  const std::string common = fmt::format(
      " --vocab {} --max-seq-len {} --max-predictions {} --dupe-factor 1 --progress none",
      (kModel / "vocab.txt").string(), golden["seq_len"].get<int>(),
      golden["max_predictions"].get<int>());
  for (const auto& [inputs, output] :
       {std::pair{train, "train"},
        std::pair{" --input " + (kLicenses / golden["held_out"].get<std::string>()).string(),
                  "eval"}}) {
    const auto r = test::run_polyhal("prepare-data" + inputs + " --output " +
                                     (dir.path() / output).string() + common);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const auto init = dir.write(
      "init.yaml",
      fmt::format("backend: cpu\ntask: inference\nmodel: {{preset: tiny, vocab_size: 30522, "
                  "seq_len: {}, head: pretraining, seed: 5, save: {}}}\nbatch: {{micro: 1}}\n"
                  "data: {{source: generated}}\ninference: {{iterations: 1, warmup: 0}}\n",
                  golden["seq_len"].get<int>(), (dir.path() / "init").string()));
  ASSERT_EQ(test::run_polyhal("run --config " + init.string()).exit_code, 0);
  const auto config = dir.write(
      "p.yaml",
      fmt::format(
          "backend: cpu\ntask: pretrain\nmodel: {{hf_config: init/config.json, seq_len: {}, "
          "precision: f32, dropout: 0}}\nbatch: {{micro: {}}}\ndata: {{source: mlperf_hdf5, "
          "files: train, shuffle: false}}\noptimizer: {{name: lamb, learning_rate: {}, "
          "warmup_steps: {}, weight_decay: 0.01}}\neval: {{files: eval, every_steps: {}, "
          "micro: 64}}\ncheckpoint: {{init: init}}\nsteps: {}\n",
          golden["seq_len"].get<int>(), golden["batch"].get<int>(),
          golden["learning_rate"].get<double>(), golden["warmup_steps"].get<int>(),
          golden["eval_every"].get<int>(), golden["steps"].get<int>()));
  const auto metrics = dir.path() / "m.jsonl";
  const auto r =
      test::run_command("cd " + dir.path().string() + " && " + POLYHAL_LAUNCHER +
                        " run --config p.yaml --metrics-out " + metrics.string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto steps = test::step_records(metrics);
  const auto& losses = golden["losses"];
  ASSERT_EQ(steps.size(), losses.size());
  double worst = 0;
  for (std::size_t i = 0; i < steps.size(); ++i)
    worst = std::max(worst, std::abs(steps[i]["loss"].get<double>() - losses[i].get<double>()));
  // f32 on both sides, summed in other orders: the curves are the same curve.
  EXPECT_LT(worst, 2e-3) << "largest step-loss difference from transformers";
  EXPECT_LT(losses.back().get<double>(), losses.front().get<double>() - 0.2) << "it learns";
  const auto evals = test::metric_records(metrics, "eval");
  ASSERT_EQ(evals.size(), golden["evaluations"].size());
  for (std::size_t i = 0; i < evals.size(); ++i) {
    const auto& want = golden["evaluations"][i];
    EXPECT_EQ(evals[i]["step"], want["step"]);
    EXPECT_EQ(evals[i]["masked_tokens"], want["masked_tokens"]);
    EXPECT_NEAR(evals[i]["mlm_accuracy"].get<double>(), want["mlm_accuracy"].get<double>(), 0.003)
        << want;
    EXPECT_NEAR(evals[i]["mlm_loss"].get<double>(), want["mlm_loss"].get<double>(), 2e-3) << want;
    EXPECT_NEAR(evals[i]["nsp_accuracy"].get<double>(), want["nsp_accuracy"].get<double>(), 0.005)
        << want;
  }
}

}  // namespace
}  // namespace polyhal
