// Evaluation during pre-training: the held-out data scored as MLPerf scores
// it, against PyTorch's scores of the same weights and files
// (tests/golden/make_pretrain_eval_golden.py), on every backend, unpacked
// and packed, over replicas and pipeline stages; stop_at ends a run with a
// checkpoint; bad evaluation data is refused by validate, naming the key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kSource = POLYHAL_SOURCE_DIR;
const std::filesystem::path kMlperf = kSource / "tests/data/mlperf";
const std::filesystem::path kTiny = kSource / "tests/golden/bert_tiny";

/// Evaluates the golden weights (steps: 0) with `sets`; the eval record.
nlohmann::json evaluation(const test::TempDir& dir, const std::string& sets) {
  const auto config = dir.write(
      "eval.yaml",
      fmt::format("backend: cpu\ntask: pretrain\nmodel: {{hf_config: {}, weights: {}, seq_len: "
                  "16}}\nbatch: {{micro: 3}}\ndata: {{source: mlperf_hdf5, files: {}}}\n"
                  "eval: {{files: {}}}\nsteps: 0\n",
                  (kTiny / "config.json").string(), (kTiny / "eval_trained.safetensors").string(),
                  kMlperf.string(), kMlperf.string()));
  const auto metrics = dir.path() / "m.jsonl";
  const auto r = test::run_polyhal("run --config " + config.string() + " --metrics-out " +
                                   metrics.string() + " " + sets);
  EXPECT_EQ(r.exit_code, 0) << sets << "\n" << r.output;
  const auto evals = test::metric_records(metrics, "eval");
  if (!evals.empty()) return evals.front();
  ADD_FAILURE() << "no evaluation with " << sets << "\n" << r.output;
  return {};
}

TEST(PretrainEval, ScoresTheHeldOutDataAsPyTorchDoes) {
  nlohmann::json golden;
  std::ifstream(kTiny / "eval_golden.json") >> golden;
  ASSERT_GT(golden["mlm_accuracy"].get<double>(), 0.2) << "the golden model predicts some";
  ASSERT_LT(golden["mlm_accuracy"].get<double>(), 0.9);
  test::TempDir dir;
  const auto pack = test::run_polyhal("pack --input " + kMlperf.string() + " --output " +
                                      (dir.path() / "packed").string() + " --max-seq-len 32");
  ASSERT_EQ(pack.exit_code, 0) << pack.output;
  // micro 3 leaves a short last batch of 2; packed rows of 32 hold two
  // sequences each and are scored as the same sequences unpacked.
  const std::vector<std::pair<std::string, double>> runs{
      {"", 1e-4},
      {"--set batch.replicas=2", 1e-4},
      {"--set model.pipeline=2 --set eval.micro=8", 1e-4},
      {"--set model.seq_len=32 --set data.source=generated --set data.files=null --set "
       "eval.files=" +
           (dir.path() / "packed").string(),
       1e-4},
      {"--backend gaudi --set model.precision=bf16", 0.03},
      {"--backend ipu --set model.precision=f16 --set model.pipeline=2", 0.01}};
  for (const auto& [sets, tolerance] : runs) {
    const auto e = evaluation(dir, sets);
    if (e.is_null()) continue;
    EXPECT_EQ(e["step"], 0) << sets;
    EXPECT_EQ(e["masked_tokens"], golden["masked_tokens"]) << sets;
    EXPECT_EQ(e["sequences"], golden["sequences"]) << sets;
    // The golden model's top two logits are at least 0.09 apart: no tie to break.
    EXPECT_DOUBLE_EQ(e["mlm_accuracy"].get<double>(), golden["mlm_accuracy"].get<double>()) << sets;
    EXPECT_DOUBLE_EQ(e["nsp_accuracy"].get<double>(), golden["nsp_accuracy"].get<double>()) << sets;
    EXPECT_NEAR(e["mlm_loss"].get<double>(), golden["mlm_loss"].get<double>(), tolerance) << sets;
    EXPECT_NEAR(e["nsp_loss"].get<double>(), golden["nsp_loss"].get<double>(), tolerance) << sets;
  }
}

std::string pattern_config(const test::TempDir& dir, const std::string& extra) {
  return dir
      .write("p.yaml",
             "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, vocab_size: 64, "
             "dropout: 0}\nbatch: {micro: 16, grad_accum: 2}\ndata: {source: pattern, seed: 1, "
             "max_predictions: 5}\noptimizer: {name: adamw, learning_rate: 0.005, warmup_steps: "
             "10, end_learning_rate: 0.0005}\n"
             "checkpoint: {dir: ckpt, every: 1000}\n" +
                 extra)
      .string();
}

// eval.every_steps evaluates on schedule and at the end; stop_at ends the run
// at the first evaluation that reaches it, with a checkpoint of that step,
// and a rerun ends there again without training.
TEST(PretrainEval, StopAtEndsTheRunWithACheckpoint) {
  test::TempDir dir;
  const auto config = pattern_config(
      dir, "eval: {source: pattern, samples: 64, every_steps: 10, stop_at: 0.8}\nsteps: 150\n");
  const auto metrics = dir.path() / "m.jsonl";
  auto r = test::run_polyhal("run --config " + config + " --metrics-out " + metrics.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto evals = test::metric_records(metrics, "eval");
  ASSERT_GE(evals.size(), 2u) << r.output;
  for (std::size_t i = 0; i < evals.size(); ++i) {
    EXPECT_EQ(evals[i]["step"], 10 * static_cast<int>(i + 1));
    EXPECT_EQ(evals[i]["sequences"], 64);
    EXPECT_EQ(evals[i]["mlm_accuracy"].get<double>() >= 0.8, i + 1 == evals.size());
  }
  const int stop = evals.back()["step"];
  ASSERT_LT(stop, 150) << "the target was reached early";
  const auto summary = test::last_json_line(metrics);
  EXPECT_EQ(summary["steps_run"], stop);
  EXPECT_EQ(summary["reached_target"], true);
  EXPECT_TRUE(std::filesystem::exists(dir.path() /
                                      fmt::format("ckpt/checkpoint-{:08d}.safetensors", stop)));
  EXPECT_NE(r.output.find("target 0.8 reached, the run ends here"), std::string::npos) << r.output;
  // The rerun evaluates where it stopped, and stops again.
  r = test::run_polyhal("run --config " + config + " --metrics-out " + metrics.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(test::last_json_line(metrics)["eval_step"], stop) << r.output;
  EXPECT_EQ(test::last_json_line(metrics)["steps_run"], 0) << r.output;  // it trained nothing
  EXPECT_NE(r.output.find(fmt::format("done before: {} of 150 steps", stop)), std::string::npos)
      << r.output;
}

TEST(PretrainEval, BadEvaluationDataIsRefusedByValidateNamingTheKey) {
  test::TempDir dir;
  const auto validate = [&](const std::string& yaml) {
    const auto config = dir.write("v.yaml", "backend: cpu\ntask: pretrain\n" + yaml);
    return test::run_polyhal("validate --config " + config.string());
  };
  const std::string files = "eval: {files: " + kMlperf.string() + "}\n";
  struct Case {
    std::string yaml, expected;
  };
  for (const auto& c : std::vector<Case>{
           {"model: {preset: tiny, seq_len: 32}\n" + files,
            "v.yaml:4: key 'eval.files': " + kMlperf.string() +
                "/part-00000-of-00002.hdf5 holds sequences of 16 tokens, but model.seq_len is 32"},
           {"model: {preset: tiny, seq_len: 16, vocab_size: 30}\n" + files,
            "v.yaml:4: key 'eval.files': " + kMlperf.string() +
                "/part-00000-of-00002.hdf5 (row 2): token id 30 outside the model's vocabulary "
                "of 30"},
           {"model: {preset: tiny, seq_len: 16}\neval: {every_steps: 10}\n",
            "key 'eval.files': required by the eval keys given"},
           {"model: {preset: tiny, seq_len: 16}\neval: {source: mlperf_hdf5}\n",
            "v.yaml:4: key 'eval.files': required by eval.source mlperf_hdf5"},
           {"model: {preset: tiny, seq_len: 16}\neval: {source: pattern, stop_at: 72}\n",
            "v.yaml:4: key 'eval.stop_at': expected an accuracy in [0, 1]"},
           {"model: {preset: tiny, seq_len: 16}\neval: {source: pattern, every_steps: 2, "
            "every_samples: 64}\n",
            "key 'eval.every_samples': give eval.every_steps or eval.every_samples, not both"},
           {"model: {preset: tiny, seq_len: 16}\nsteps: 0\n",
            "v.yaml:4: key 'steps': 0 trains nothing and only evaluates"},
       }) {
    const auto r = validate(c.yaml);
    EXPECT_EQ(r.exit_code, 2) << c.yaml << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.yaml << r.output;
  }
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

// The seeds' schedule terms in pre-training: training by samples (whole
// steps, rounded up), checkpoints by samples after a start (Intel's
// num_samples_per_checkpoint and min_samples_to_start_checkpoints), and
// Habana's learning rate per worker, which trains exactly as the same
// effective rate given whole.
TEST(PretrainSchedule, SamplesCheckpointsBySamplesAndTheRatePerWorker) {
  test::TempDir dir;
  const auto config = dir.write(
      "s.yaml",
      "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, vocab_size: 64, "
      "dropout: 0}\nbatch: {micro: 8, replicas: 2}\ndata: {source: pattern, seed: 1, "
      "max_predictions: 3}\noptimizer: {name: adamw, warmup_steps: 5}\nsamples: 500\n"
      "checkpoint: {dir: ckpt, every_samples: 160, start_after_samples: 320}\nlog: {every: 1}\n");
  const auto run = [&](const std::string& name, const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_polyhal("run --config " + config.string() + " --metrics-out " +
                                     metrics.string() + " " + sets);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return std::make_pair(r.output, test::step_records(metrics));
  };
  const auto [output, per_worker] =
      run("a", "--set optimizer.learning_rate_per_worker=0.0025 --set checkpoint.dir=a");
  EXPECT_NE(output.find("samples 500: 32 steps of 16 samples"), std::string::npos) << output;
  EXPECT_NE(output.find("optimizer.learning_rate_per_worker 0.0025 x 2 replicas: learning rate "
                        "0.005"),
            std::string::npos)
      << output;
  ASSERT_EQ(per_worker.size(), 32u) << "ceil(500 / 16)";
  std::vector<std::string> saved;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "a"))
    if (entry.path().extension() == ".safetensors") saved.push_back(entry.path().stem().string());
  std::sort(saved.begin(), saved.end());
  // Every 160 samples = 10 steps, none before 320 samples (step 20), and the end.
  EXPECT_EQ(saved, (std::vector<std::string>{"checkpoint-00000020", "checkpoint-00000030",
                                             "checkpoint-00000032"}));
  const auto [_, whole] = run("b", "--set optimizer.learning_rate=0.005 --set checkpoint.dir=b");
  ASSERT_EQ(whole.size(), per_worker.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(per_worker[i]["learning_rate"], whole[i]["learning_rate"]) << i;
    EXPECT_EQ(per_worker[i]["loss"], whole[i]["loss"]) << i;
  }
  const auto both = test::run_polyhal("validate --config " + config.string() + " --set steps=3");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.output.find("key 'samples': give steps or samples, not both"), std::string::npos)
      << both.output;
}

}  // namespace
}  // namespace polyhal
