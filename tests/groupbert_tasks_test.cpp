// GroupBERT through the tasks: pre-training (plain and packed rows, and in
// two pipeline stages exactly as the whole model) writes a Hugging
// Face-style export with the GroupBERT keys, GLUE fine-tuning starts from it
// and learns, and its saved model says what it is; SQuAD fine-tuning learns
// a span task and its exported model answers alone as it did in training.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <random>

#include "synthetic_tasks.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

/// A 95-word vocabulary and a sentence task: label 1 when the words come
/// from the upper half of it.
void write_task(const test::TempDir& dir) {
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (int w = 0; w < 90; ++w) vocab += fmt::format("w{}\n", w);
  dir.write("vocab.txt", vocab);
  std::mt19937 rng(1);
  for (const auto& [name, rows] : {std::pair{"train.tsv", 256}, std::pair{"dev.tsv", 64}}) {
    std::string tsv = "sentence\tlabel\n";
    for (int r = 0; r < rows; ++r) {
      const int label = static_cast<int>(rng() % 2);
      const int words = 3 + static_cast<int>(rng() % 6);
      for (int w = 0; w < words; ++w)
        tsv += fmt::format("{}w{}", w ? " " : "", static_cast<int>(rng() % 45) + 45 * label);
      tsv += fmt::format("\t{}\n", label);
    }
    dir.write(name, tsv);
  }
}

TEST(GroupBertTasks, PretrainExportsAndGlueFineTunesFromIt) {
  test::TempDir dir;
  write_task(dir);
  const auto model = test::golden_dir().parent_path() / "groupbert/config.json";
  const auto pre =
      dir.write("pre.yaml",
                fmt::format("backend: cpu\ndevice: {{threads: 1}}\ntask: pretrain\n"
                            "model: {{hf_config: {}, seq_len: 16, precision: f32, dropout: 0.1}}\n"
                            "batch: {{micro: 8}}\ndata: {{source: pattern, max_predictions: 3}}\n"
                            "optimizer: {{name: adamw, learning_rate: 0.005, warmup_steps: 5}}\n"
                            "checkpoint: {{dir: ck}}\nsteps: 40\n",
                            model.string()));
  const auto metrics = dir.path() / "pre.jsonl";
  auto r = test::run_polyhal("run --config " + pre.string() + " --metrics-out " + metrics.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto losses = test::step_losses(metrics);
  ASSERT_EQ(losses.size(), 40u);
  EXPECT_LT(losses.back(), losses.front() - 0.2) << "it learns the pattern";
  std::ifstream exported(dir.path() / "ck/hf/config.json");
  const auto config = nlohmann::json::parse(exported);
  EXPECT_EQ(config["model_type"], "groupbert");
  EXPECT_EQ(config["groupbert_conv_kernel_size"], 5);
  // Packed rows train too (the convolution stays inside each sequence).
  r = test::run_polyhal("run --config " + pre.string() +
                        " --set data.packed=true --set checkpoint.dir=ck-packed --set steps=3");
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // Two pipeline stages train as the whole model (dropout streams included).
  const auto pipelined = dir.path() / "pipelined.jsonl", whole = dir.path() / "whole.jsonl";
  r = test::run_polyhal("run --config " + pre.string() +
                        " --set model.pipeline=2 --set checkpoint.dir=ck-pipelined --set steps=5 "
                        "--metrics-out " +
                        pipelined.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = test::run_polyhal("run --config " + pre.string() +
                        " --set checkpoint.dir=ck-whole --set steps=5 --metrics-out " +
                        whole.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto a = test::step_losses(pipelined), b = test::step_losses(whole);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;

  const auto glue =
      dir.write("glue.yaml",
                "backend: cpu\ndevice: {threads: 1}\ntask: glue\nmodel: {seq_len: 16, precision: "
                "f32}\nbatch: {micro: 16}\n"
                "data: {vocab: vocab.txt}\noptimizer: {name: adamw, learning_rate: 0.001}\n"
                "checkpoint: {init: ck/hf}\nfinetune: {glue_task: sst-2, train_file: train.tsv, "
                "eval_file: dev.tsv, epochs: 3, output_dir: out}\n");
  const auto glue_metrics = dir.path() / "glue.jsonl";
  r = test::run_polyhal("run --config " + glue.string() + " --metrics-out " +
                        glue_metrics.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto evals = test::metric_records(glue_metrics, "eval");
  ASSERT_EQ(evals.size(), 3u);
  EXPECT_GT(evals.back()["accuracy"].get<double>(), 0.75) << r.output;
  std::ifstream saved(dir.path() / "out/model/config.json");
  EXPECT_EQ(nlohmann::json::parse(saved)["model_type"], "groupbert");
}

TEST(GroupBertTasks, TwoReplicasTrainAsOneReplicaWithTwiceTheAccumulation) {
  // Replica r takes micro-batches r, r+2, ...: the mean of two replicas'
  // gradients is the two-micro-batch accumulation, dropout streams included.
  test::TempDir dir;
  const auto model = test::golden_dir().parent_path() / "groupbert/config.json";
  const auto config =
      dir.write("pre.yaml",
                fmt::format("backend: cpu\ntask: pretrain\n"
                            "model: {{hf_config: {}, seq_len: 16, precision: f32, dropout: 0.1}}\n"
                            "batch: {{micro: 8}}\ndata: {{source: pattern, max_predictions: 3}}\n"
                            "optimizer: {{name: lamb, learning_rate: 0.005}}\nsteps: 4\n",
                            model.string()));
  std::vector<double> losses[2];
  for (const int replicas : {2, 1}) {
    const auto metrics = dir.path() / fmt::format("r{}.jsonl", replicas);
    const auto r = test::run_polyhal(fmt::format(
        "run --config {} --set batch.replicas={} --set batch.grad_accum={} --metrics-out {}",
        config.string(), replicas, 3 - replicas, metrics.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    losses[replicas - 1] = test::step_losses(metrics);
  }
  ASSERT_EQ(losses[0].size(), 4u);
  ASSERT_EQ(losses[1].size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(losses[1][i], losses[0][i], 1e-5) << i;
}

TEST(GroupBertTasks, ASequenceShorterThanTheKernelOrWidthsGroupsDoNotDivideNameLineAndKey) {
  test::TempDir dir;
  const auto model = test::golden_dir().parent_path() / "groupbert/config.json";
  const auto config =
      dir.write("short.yaml", fmt::format("backend: cpu\ntask: pretrain\nmodel:\n"
                                          "  hf_config: {}\n  seq_len: 4\nsteps: 1\n",
                                          model.string()));
  for (const std::string command : {"validate", "run"}) {
    const auto r = test::run_polyhal(command + " --config " + config.string());
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(config.string() +
                            ":5: key 'model.seq_len': 4 tokens, fewer than GroupBERT's "
                            "convolution kernel of 5 positions (groupbert_conv_kernel_size of " +
                            model.string() + ")"),
              std::string::npos)
        << r.output;
  }
  const auto r = test::run_polyhal("validate --config " + config.string() +
                                   " --set model.seq_len=16 --set model.hidden_size=36");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--set model.hidden_size=36, " + model.string() +
                          ": key 'groupbert_conv_group_size': 8 does not divide hidden_size 36"),
            std::string::npos)
      << r.output;
}

TEST(GroupBertTasks, SquadFineTuningLearnsTheSpanAndItsExportAnswersAlone) {
  test::TempDir dir;
  test::write_synthetic_vocab(dir);
  dir.write("train.json", test::squad_json(2000, "t", 1));
  dir.write("dev.json", test::squad_json(200, "d", 2));
  const auto model = test::golden_dir().parent_path() / "groupbert/config.json";
  const auto config = dir.write(
      "squad.yaml",
      fmt::format("backend: cpu\ndevice: {{threads: 1}}\ntask: squad\n"
                  "model: {{hf_config: {}, seq_len: 32, precision: f32, dropout: 0.0}}\n"
                  "data: {{vocab: vocab.txt}}\nbatch: {{micro: 32}}\n"
                  "optimizer: {{name: adamw, learning_rate: 0.003, max_grad_norm: 1.0}}\n"
                  "finetune: {{train_file: train.json, eval_file: dev.json, output_dir: out, "
                  "epochs: 4, max_query_length: 8}}\n",
                  model.string()));
  const auto metrics = dir.path() / "m.jsonl";
  auto r = test::run_polyhal(
      fmt::format("run --config {} --metrics-out {}", config.string(), metrics.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto evals = test::metric_records(metrics, "eval");
  ASSERT_EQ(evals.size(), 4u) << r.output;
  const double exact = evals.back()["exact"].get<double>();
  std::cout << "GroupBERT SQuAD exact " << exact << "\n";
  EXPECT_GE(exact, 80.0) << r.output;
  std::ifstream saved(dir.path() / "out/model/config.json");
  const auto hf = nlohmann::json::parse(saved);
  EXPECT_EQ(hf["model_type"], "groupbert");
  EXPECT_EQ(hf["architectures"][0], "BertForQuestionAnswering");

  // The export alone, through the inference program, scores as training's last evaluation.
  const auto alone = dir.path() / "alone.jsonl";
  r = test::run_polyhal(fmt::format(
      "run --config {} --metrics-out {} --set finetune.do=eval --set checkpoint.init=out/model "
      "--set finetune.output_dir=alone",
      config.string(), alone.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto alone_evals = test::metric_records(alone, "eval");
  ASSERT_EQ(alone_evals.size(), 1u) << r.output;
  EXPECT_NEAR(alone_evals[0]["exact"].get<double>(), exact, 1e-9);
  EXPECT_NEAR(alone_evals[0]["f1"].get<double>(), evals.back()["f1"].get<double>(), 1e-9);
}

}  // namespace
}  // namespace polyhal
