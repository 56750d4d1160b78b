// Tasks squad and glue through the launcher: fine-tuning learns synthetic
// SQuAD- and GLUE-format tasks whose answers are determined by the text,
// writes the reference's output files and a model Hugging Face's layout
// loads, resumes exactly, starts from a pre-training export, and refuses bad
// input with file, line or key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/safetensors.hpp"
#include "synthetic_tasks.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

/// MRPC-format TSV: label 1 when both sentences carry the same marker word
/// (good/bad), so the label depends on both sentences.
std::string mrpc_tsv(int rows, unsigned seed) {
  std::mt19937 rng(seed);
  const auto sentence = [&](const std::string& marker) {
    std::vector<std::string> words(std::uniform_int_distribution<std::size_t>(3, 8)(rng));
    for (auto& w : words) w = test::synthetic_word(rng);
    words.insert(
        words.begin() + static_cast<std::ptrdiff_t>(
                            std::uniform_int_distribution<std::size_t>(0, words.size())(rng)),
        marker);
    std::string text;
    for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
    return text;
  };
  std::string tsv = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n";
  for (int r = 0; r < rows; ++r) {
    const std::string a = rng() % 2 ? "good" : "bad", b = rng() % 2 ? "good" : "bad";
    tsv += fmt::format("{}\t{}\t{}\t{}\t{}\n", a == b ? 1 : 0, 2 * r, 2 * r + 1, sentence(a),
                       sentence(b));
  }
  return tsv;
}

nlohmann::json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

std::string squad_config(const test::TempDir& dir, const std::string& extra = "") {
  test::write_synthetic_vocab(dir);
  if (!std::filesystem::exists(dir.path() / "train.json")) {
    dir.write("train.json", test::squad_json(4000, "t", 1));
    dir.write("dev.json", test::squad_json(200, "d", 2));
  }
  return dir
      .write("squad.yaml",
             "backend: cpu\ntask: squad\n"
             "model: {preset: mini, seq_len: 32, vocab_size: 64, dropout: 0.0}\n"
             "data: {vocab: vocab.txt}\nbatch: {micro: 32}\n"
             "optimizer: {name: adamw, learning_rate: 0.0005, max_grad_norm: 1.0}\n"
             "finetune: {train_file: train.json, eval_file: dev.json, output_dir: out, epochs: 5, "
             "max_query_length: 8}\n" +
                 extra)
      .string();
}

std::string glue_config(const test::TempDir& dir, const std::string& extra = "", int epochs = 12) {
  test::write_synthetic_vocab(dir);
  if (!std::filesystem::exists(dir.path() / "train.tsv")) {
    dir.write("train.tsv", mrpc_tsv(3000, 1));
    dir.write("dev.tsv", mrpc_tsv(200, 2));
  }
  return dir
      .write("glue.yaml",
             "backend: cpu\ntask: glue\n"
             "model: {preset: tiny, seq_len: 32, vocab_size: 64, dropout: 0.0}\n"
             "data: {vocab: vocab.txt}\nbatch: {micro: 32}\n"
             "optimizer: {name: adamw, learning_rate: 0.0005, max_grad_norm: 1.0}\n"
             "finetune: {glue_task: mrpc, train_file: train.tsv, eval_file: dev.tsv, "
             "output_dir: out, epochs: " +
                 std::to_string(epochs) + "}\n" + extra)
      .string();
}

TEST(SquadTask, LearnsTheSpanAfterAMarkerAndWritesTheReferenceFiles) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  const auto run = test::run_polyhal(
      fmt::format("run --config {} --metrics-out {}", squad_config(dir), metrics.string()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto evaluations = test::metric_records(metrics, "eval");
  ASSERT_EQ(evaluations.size(), 5u) << run.output;  // one per epoch
  EXPECT_GE(evaluations.back()["exact"].get<double>(), 90.0) << run.output;
  EXPECT_LT(evaluations.front()["step"].get<int>(), evaluations.back()["step"].get<int>());

  const auto predictions = read_json(dir.path() / "out/eval/predictions.json");
  const auto nbest = read_json(dir.path() / "out/eval/nbest_predictions.json");
  ASSERT_EQ(predictions.size(), 200u);
  ASSERT_TRUE(predictions.contains("d17"));
  const auto& candidates = nbest["d17"];
  ASSERT_FALSE(candidates.empty());
  EXPECT_LE(candidates.size(), 20u);
  double probability = 0;
  for (const auto& c : candidates) probability += c["probability"].get<double>();
  EXPECT_NEAR(probability, 1.0, 1e-6);
  EXPECT_EQ(candidates[0]["text"], predictions["d17"]);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out/eval/null_odds.json"));  // v1.1

  // The model in Hugging Face's BertForQuestionAnswering layout.
  const auto hf = read_json(dir.path() / "out/model/config.json");
  EXPECT_EQ(hf["architectures"][0], "BertForQuestionAnswering");
  const TensorMap weights = read_safetensors(dir.path() / "out/model/model.safetensors");
  EXPECT_EQ(weights.at("qa_outputs.weight").shape, (Shape{2, 256}));
  EXPECT_TRUE(weights.contains("bert.encoder.layer.1.output.LayerNorm.bias"));
  EXPECT_FALSE(weights.contains("bert.pooler.dense.weight"));  // none in BertForQuestionAnswering
  for (const auto& [name, tensor] : weights) EXPECT_FALSE(name.starts_with("cls.")) << name;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "out/model/vocab.txt"));

  // Evaluating the exported model alone gives the training run's last score.
  const auto alone_metrics = dir.path() / "alone.jsonl";
  const auto alone = test::run_polyhal(fmt::format(
      "run --config {} --metrics-out {} --set finetune.do=eval --set checkpoint.init=out/model "
      "--set finetune.output_dir=alone",
      (dir.path() / "squad.yaml").string(), alone_metrics.string()));
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const auto alone_eval = test::metric_records(alone_metrics, "eval");
  ASSERT_EQ(alone_eval.size(), 1u);
  EXPECT_DOUBLE_EQ(alone_eval[0]["exact"].get<double>(), evaluations.back()["exact"].get<double>());
  EXPECT_EQ(alone_eval[0]["epoch"], 0);

  // INT8 evaluation of the same model keeps F1 within MLPerf's BERT-99 rule
  // (at least 99% of the f32 F1), with dynamic and with calibrated static
  // activations (calibrated on the dev set, as MLPerf calibrates on its own
  // split of it).
  const auto f32_f1 = alone_eval[0]["f1"].get<double>();
  if (const auto why = test::cpu_without_int8()) {
    std::cout << "int8 skipped: " << *why << "\n";
    return;
  }
  const auto scales = dir.path() / "scales.json";
  const auto calibrate = test::run_polyhal(
      fmt::format("run --config {} --set finetune.do=eval --set checkpoint.init=out/model "
                  "--set finetune.output_dir=calibrate --set model.calibrate={}",
                  (dir.path() / "squad.yaml").string(), scales.string()));
  ASSERT_EQ(calibrate.exit_code, 0) << calibrate.output;
  // "smoothed": dynamic activations smoothed with the file's per-channel maxima.
  for (const std::string mode : {"dynamic", "static", "smoothed"}) {
    const std::string activations = mode == "static" ? "static" : "dynamic";
    const auto int8_metrics = dir.path() / ("int8-" + mode + ".jsonl");
    const auto int8 = test::run_polyhal(fmt::format(
        "run --config {} --metrics-out {} --set finetune.do=eval --set checkpoint.init=out/model "
        "--set finetune.output_dir=int8 --set model.precision=int8 --set "
        "model.int8_activations={}{}",
        (dir.path() / "squad.yaml").string(), int8_metrics.string(), activations,
        mode != "dynamic" ? " --set model.int8_scales=" + scales.string() : ""));
    ASSERT_EQ(int8.exit_code, 0) << int8.output;
    const auto int8_eval = test::metric_records(int8_metrics, "eval");
    ASSERT_EQ(int8_eval.size(), 1u);
    const double f1 = int8_eval[0]["f1"].get<double>();
    std::cout << fmt::format("SQuAD F1: f32 {:.3f}, int8 {} {:.3f} ({:.2f}%)\n", f32_f1, mode, f1,
                             100.0 * f1 / f32_f1);
    EXPECT_GE(f1, 0.99 * f32_f1) << mode;
  }
  // A scales file is read by int8 only, and dynamic int8 needs its
  // per-channel maxima (a file without them serves static only).
  const auto refused = [&](const std::string& sets, const std::string& message) {
    const auto refusal = test::run_polyhal(
        fmt::format("run --config {} --set finetune.do=eval --set checkpoint.init=out/model "
                    "--set finetune.output_dir=refused {}",
                    (dir.path() / "squad.yaml").string(), sets));
    EXPECT_EQ(refusal.exit_code, 2) << refusal.output;
    EXPECT_NE(refusal.output.find(message), std::string::npos) << refusal.output;
  };
  refused("--set model.precision=f32 --set model.int8_scales=" + scales.string(),
          "key 'model.int8_scales': read by model.precision int8 only, not f32");
  nlohmann::json stripped = nlohmann::json::parse(std::ifstream(scales));
  stripped.erase("channel_max_abs");
  const auto old_file = dir.write("old-scales.json", stripped.dump());
  refused("--set model.precision=int8 --set model.int8_scales=" + old_file.string(),
          "has no per-channel maxima, which dynamic int8 smooths with");
}

TEST(SquadTask, PackedFeaturesLearnInFewerRowsAndPredictAsUnpacked) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  const std::string config = squad_config(dir);
  const std::string packed = "--set model.seq_len=64 --set finetune.packed=true ";
  const auto run =
      test::run_polyhal(fmt::format("run --config {} --metrics-out {} {}", config, metrics.string(),
                                    packed + "--set batch.micro=16"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // 4000 features of 15-25 tokens: about 3 to a row of 64.
  const std::regex packing("4000 features packed into ([0-9]+) rows");
  std::smatch found;
  ASSERT_TRUE(std::regex_search(run.output, found, packing)) << run.output;
  const int rows = std::stoi(found[1]);
  EXPECT_LT(rows, 1600) << run.output;  // 1482 with SPFHP
  EXPECT_GE(rows, 4000 / 3) << run.output;
  const auto steps = test::metric_records(metrics, "step");
  ASSERT_FALSE(steps.empty());
  std::int64_t sequences = 0;
  for (const auto& step : steps) sequences += step["sequences"].get<std::int64_t>();
  EXPECT_GT(sequences, 2 * 16 * static_cast<std::int64_t>(steps.size())) << "sequences per row";
  const auto evaluations = test::metric_records(metrics, "eval");
  ASSERT_EQ(evaluations.size(), 5u) << run.output;
  EXPECT_GE(evaluations.back()["exact"].get<double>(), 90.0) << run.output;

  // Packed and unpacked evaluation of the trained model: the same answers.
  const auto eval = [&](const std::string& how, const std::string& out) {
    const auto m = dir.path() / (out + ".jsonl");
    const auto r = test::run_polyhal(fmt::format(
        "run --config {} --metrics-out {} --set model.seq_len=64 --set "
        "finetune.do=eval --set checkpoint.init=out/model --set finetune.output_dir={} {}",
        config, m.string(), out, how));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return test::metric_records(m, "eval").at(0);
  };
  const auto packed_eval = eval("--set finetune.packed=true", "packed");
  const auto unpacked_eval = eval("", "unpacked");
  EXPECT_DOUBLE_EQ(packed_eval["exact"].get<double>(), unpacked_eval["exact"].get<double>());
  EXPECT_DOUBLE_EQ(packed_eval["exact"].get<double>(), evaluations.back()["exact"].get<double>());
  EXPECT_EQ(read_json(dir.path() / "packed/eval/predictions.json"),
            read_json(dir.path() / "unpacked/eval/predictions.json"));
  // The reference ranks the n-best start and end logits over the padding
  // too and then drops those: a packed feature, whose row holds no padding
  // of its own, ranks its tokens only, so it finds every unpacked candidate
  // that scores within its n best (and can find more), with the same best.
  // A text is listed once, by its best span: where packed found a better
  // span of the same text, it lists that text with the higher score.
  const auto a = read_json(dir.path() / "packed/eval/nbest_predictions.json");
  const auto b = read_json(dir.path() / "unpacked/eval/nbest_predictions.json");
  const auto score = [](const nlohmann::json& c) {
    return c["start_logit"].get<double>() + c["end_logit"].get<double>();
  };
  for (const auto& [id, list] : b.items()) {
    const auto& packed_list = a[id];
    ASSERT_GE(packed_list.size(), list.size()) << id;
    EXPECT_EQ(packed_list[0]["text"], list[0]["text"]) << id;
    EXPECT_NEAR(score(packed_list[0]), score(list[0]), 1e-4) << id;
    const double lowest = score(packed_list.back());
    for (const auto& candidate : list) {
      if (score(candidate) < lowest + 1e-3) continue;
      bool listed = false;
      for (const auto& p : packed_list)
        listed = listed || (p["text"] == candidate["text"] && score(p) > score(candidate) - 1e-4);
      EXPECT_TRUE(listed) << id << " " << candidate << "\npacked n-best: " << packed_list;
    }
  }
}

TEST(SquadTask, PackedFeaturesTrainPipelinedLikeTheWholeModel) {
  test::TempDir dir;
  const std::string config = squad_config(dir, "log: {every: 1}\n");
  const auto losses = [&](const std::string& name, const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_polyhal(fmt::format(
        "run --config {} --metrics-out {} --set model.seq_len=64 --set finetune.packed=true "
        "--set finetune.do=train --set finetune.epochs=1 --set batch.micro=16 "
        "--set finetune.output_dir={} {}",
        config, metrics.string(), name, sets));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return test::step_losses(metrics);
  };
  const auto whole = losses("whole", ""), piped = losses("piped", "--set model.pipeline=2");
  ASSERT_GT(whole.size(), 50u);
  ASSERT_EQ(piped.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(piped[i], whole[i], 1e-5) << i;
}

TEST(GlueTask, LearnsWhetherTwoSentencesAgreeAndWritesPredictions) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  const auto run = test::run_polyhal(
      fmt::format("run --config {} --metrics-out {} --set finetune.predict_file=dev.tsv "
                  "--set finetune.do=[train,eval,predict]",
                  glue_config(dir), metrics.string()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto evaluations = test::metric_records(metrics, "eval");
  ASSERT_EQ(evaluations.size(), 12u);
  EXPECT_GE(evaluations.back()["accuracy"].get<double>(), 0.9) << run.output;
  EXPECT_TRUE(evaluations.back().contains("f1"));  // MRPC's metrics: accuracy and F1
  ASSERT_EQ(test::metric_records(metrics, "predict").size(), 1u);
  std::ifstream tsv(dir.path() / "out/predict/predictions.tsv");
  std::string line;
  std::getline(tsv, line);
  EXPECT_EQ(line, "index\tprediction");
  int rows = 0;
  while (std::getline(tsv, line)) {
    EXPECT_TRUE(line == fmt::format("{}\t0", rows) || line == fmt::format("{}\t1", rows)) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 200);
  const auto hf = read_json(dir.path() / "out/model/config.json");
  EXPECT_EQ(hf["architectures"][0], "BertForSequenceClassification");
  EXPECT_EQ(hf["id2label"]["1"], "1");
  EXPECT_EQ(hf["problem_type"], "single_label_classification");
  const TensorMap weights = read_safetensors(dir.path() / "out/model/model.safetensors");
  EXPECT_EQ(weights.at("classifier.weight").shape, (Shape{2, 128}));
  EXPECT_TRUE(weights.contains("bert.pooler.dense.weight"));
}

TEST(GlueTask, ResumesExactlyFromItsLastCheckpoint) {
  test::TempDir dir;
  const std::string config = glue_config(dir, "checkpoint: {dir: ckpt, every: 40}\n", 2);
  const auto first = test::run_polyhal(
      fmt::format("run --config {} --metrics-out {}", config, (dir.path() / "a.jsonl").string()));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // As if killed after step 100: only the checkpoints up to step 80 remain.
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "ckpt")) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("checkpoint-") && name > "checkpoint-00000080.safetensors") {
      std::filesystem::remove(entry.path());
      ++removed;
    }
  }
  ASSERT_GE(removed, 2);  // step 93 (epoch 1) and the last
  const auto second = test::run_polyhal(
      fmt::format("run --config {} --metrics-out {}", config, (dir.path() / "b.jsonl").string()));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from"), std::string::npos) << second.output;
  std::map<int, double> before;
  for (const auto& s : test::metric_records(dir.path() / "a.jsonl", "step"))
    before[s["step"]] = s["loss"];
  const auto after = test::metric_records(dir.path() / "b.jsonl", "step");
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.front()["step"], 81);
  for (const auto& s : after) EXPECT_EQ(s["loss"].get<double>(), before.at(s["step"])) << s;
  // Epoch 1 ends at step 93, after the resume point: the resumed run
  // evaluates both epochs, the last exactly as the first run did.
  const auto eval_a = test::metric_records(dir.path() / "a.jsonl", "eval");
  const auto eval_b = test::metric_records(dir.path() / "b.jsonl", "eval");
  ASSERT_EQ(eval_b.size(), 2u);
  EXPECT_EQ(eval_b.back()["accuracy"], eval_a.back()["accuracy"]);
}

// One training call for every task: a finished run whose export was lost
// (killed while writing it) writes it again on a rerun, as pre-training does.
TEST(GlueTask, ARerunWritesTheExportAFinishedRunIsMissing) {
  test::TempDir dir;
  const std::string config = glue_config(dir, "checkpoint: {dir: ckpt}\n", 1);
  const std::string run = "run --config " + config + " --set finetune.max_steps=3";
  auto r = test::run_polyhal(run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto exported = dir.path() / "out" / "model" / "model.safetensors";
  ASSERT_TRUE(std::filesystem::exists(exported)) << r.output;
  std::filesystem::remove(exported);
  r = test::run_polyhal(run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nothing to do"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("writing its missing export"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(exported)) << r.output;
}

TEST(GlueTask, TwoReplicasEqualOneWithTwiceTheAccumulationAndEvaluateTogether) {
  // Replica r takes micro-batches r, r+2, ... of the same shuffled stream, so
  // the replicas' mean gradient is the two-micro-batch accumulation; the
  // evaluation rows are split over the replicas and summed back.
  test::TempDir dir;
  const std::string config = glue_config(dir, "", 1);
  const auto run = [&](const std::string& name, const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_polyhal(
        fmt::format("run --config {} --metrics-out {} --set model.dropout=0.1 --set batch.micro=16 "
                    "--set finetune.output_dir={} {}",
                    config, metrics.string(), name, sets));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return metrics;
  };
  const auto two = run("two", "--set batch.replicas=2");
  const auto one = run("one", "--set batch.grad_accum=2");
  const auto steps_two = test::metric_records(two, "step"),
             steps_one = test::metric_records(one, "step");
  ASSERT_EQ(steps_two.size(), 93u);
  ASSERT_EQ(steps_one.size(), steps_two.size());
  for (std::size_t i = 0; i < steps_one.size(); ++i)
    ASSERT_NEAR(steps_two[i]["loss"].get<double>(), steps_one[i]["loss"].get<double>(), 1e-4) << i;
  const TensorMap a = read_safetensors(dir.path() / "two/model/model.safetensors");
  const TensorMap b = read_safetensors(dir.path() / "one/model/model.safetensors");
  for (const auto& [name, tensor] : b) {
    for (std::size_t i = 0; i < tensor.values.size(); ++i)
      ASSERT_NEAR(a.at(name).values[i], tensor.values[i], 1e-4 + 1e-3 * std::fabs(tensor.values[i]))
          << name << "[" << i << "]";
  }
  const auto eval_two = test::metric_records(two, "eval"),
             eval_one = test::metric_records(one, "eval");
  ASSERT_EQ(eval_two.size(), 1u);
  EXPECT_NEAR(eval_two[0]["accuracy"].get<double>(), eval_one[0]["accuracy"].get<double>(), 0.011);
  EXPECT_EQ(eval_two[0]["rows"], 200);
}

// Fine-tuning with model.pipeline: the stages train as the whole model
// (losses and evaluation), with 2 replicas and sharded state as well, and
// the exported model is whole.
TEST(GlueTask, PipelinedFineTuningTrainsLikeTheWholeModel) {
  test::TempDir dir;
  const std::string config = glue_config(dir, "log: {every: 1}\n", 1);
  const auto run = [&](const std::string& name, const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_polyhal(fmt::format(
        "run --config {} --metrics-out {} --set finetune.output_dir={} --set batch.replicas=2 {}",
        config, metrics.string(), name, sets));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return std::pair{metrics, r.output};
  };
  const auto [whole, whole_output] = run("whole", "");
  const auto [piped, output] =
      run("piped", "--set model.pipeline=2 --set optimizer.shard_state=true");
  EXPECT_NE(output.find("pipeline: 2 stages"), std::string::npos) << output;
  const auto steps_whole = test::metric_records(whole, "step"),
             steps_piped = test::metric_records(piped, "step");
  ASSERT_EQ(steps_whole.size(), 46u);
  ASSERT_EQ(steps_piped.size(), steps_whole.size());
  for (std::size_t i = 0; i < steps_whole.size(); ++i)
    ASSERT_NEAR(steps_piped[i]["loss"].get<double>(), steps_whole[i]["loss"].get<double>(), 1e-5)
        << i;
  EXPECT_NEAR(test::metric_records(piped, "eval")[0]["accuracy"].get<double>(),
              test::metric_records(whole, "eval")[0]["accuracy"].get<double>(), 0.006);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "piped/model/model.safetensors"));
}

TEST(GlueTask, TwoMpiRanksTrainLikeTwoReplicasInOneProcess) {
  test::TempDir dir;
  const std::string config = glue_config(dir, "log: {every: 1}\n", 1);
  const auto run = [&](const std::string& name, const std::string& command,
                       const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_command(
        fmt::format("{} run --config {} --metrics-out {} --set finetune.output_dir={} {} 2>&1",
                    command, config, metrics.string(), name, sets));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return metrics;
  };
  const auto mpi = run("mpi", test::mpirun(2),
                       "--set collective.engine=mpi --set collective.timeout_seconds=120");
  const auto local = run("local", POLYHAL_LAUNCHER, "--set batch.replicas=2");
  // Rank 0 alone reports and writes.
  const auto steps_mpi = test::metric_records(mpi, "step"),
             steps_local = test::metric_records(local, "step");
  ASSERT_EQ(steps_mpi.size(), 46u);
  ASSERT_EQ(steps_local.size(), steps_mpi.size());
  for (std::size_t i = 0; i < steps_mpi.size(); ++i)
    ASSERT_NEAR(steps_mpi[i]["loss"].get<double>(), steps_local[i]["loss"].get<double>(), 1e-5);
  ASSERT_EQ(test::metric_records(mpi, "eval").size(), 1u);
  EXPECT_EQ(test::metric_records(mpi, "eval")[0]["accuracy"],
            test::metric_records(local, "eval")[0]["accuracy"]);
}

TEST(GlueTask, TrainsInBf16MixedPrecision) {
  if (const auto why = test::cpu_without_bf16()) GTEST_SKIP() << *why;
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  const auto r =
      test::run_polyhal(fmt::format("run --config {} --metrics-out {} --set model.precision=bf16",
                                    glue_config(dir, "", 12), metrics.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(", bf16 on cpu0"), std::string::npos) << r.output;
  EXPECT_GE(test::metric_records(metrics, "eval").back()["accuracy"].get<double>(), 0.9)
      << r.output;
}

TEST(SquadTask, StartsFromAPretrainingExportWithAFreshHead) {
  test::TempDir dir;
  const auto pretrain =
      dir.write("pretrain.yaml",
                "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, vocab_size: 64}\n"
                "batch: {micro: 4}\ndata: {source: pattern, max_predictions: 3}\nsteps: 2\n"
                "checkpoint: {dir: pre}\n");
  const auto pre = test::run_polyhal("run --config " + pretrain.string());
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
  // The model comes from hf/config.json: no model section needed.
  test::write_synthetic_vocab(dir);
  dir.write("train.json", test::squad_json(64, "t", 1));
  const auto config =
      dir.write("squad.yaml",
                "backend: cpu\ntask: squad\nmodel: {seq_len: 32}\ndata: {vocab: vocab.txt}\n"
                "batch: {micro: 16}\ncheckpoint: {init: pre/hf}\n"
                "finetune: {train_file: train.json, epochs: 1, output_dir: out}\n");
  const auto run = test::run_polyhal("run --config " + config.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("newly initialised (not in the file): qa_outputs.weight, "
                            "qa_outputs.bias"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("not used by BertForQuestionAnswering: 9 tensors"), std::string::npos)
      << run.output;
  // The encoder came from the file: the first step starts from its weights.
  const TensorMap pre_weights = read_safetensors(dir.path() / "pre/hf/model.safetensors");
  const TensorMap tuned = read_safetensors(dir.path() / "out/model/model.safetensors");
  EXPECT_EQ(tuned.at("bert.embeddings.word_embeddings.weight").shape,
            pre_weights.at("bert.embeddings.word_embeddings.weight").shape);

  // A pre-training checkpoint file works as well (its optimizer state is dropped).
  const auto from_checkpoint = test::run_polyhal(
      "run --config " + config.string() +
      " --set checkpoint.init=pre/checkpoint-00000002.safetensors --set model.preset=tiny "
      "--set model.vocab_size=64");
  EXPECT_EQ(from_checkpoint.exit_code, 0) << from_checkpoint.output;
  // Resuming into a directory of pre-training checkpoints is refused.
  const auto wrong_dir =
      test::run_polyhal("run --config " + config.string() + " --set checkpoint.dir=pre");
  EXPECT_EQ(wrong_dir.exit_code, 2) << wrong_dir.output;
  EXPECT_NE(wrong_dir.output.find("holds checkpoints of 'polyhal pretrain'"), std::string::npos)
      << wrong_dir.output;
}

TEST(SquadTask, Version2ScoresHasAnsAndNoAnsAndWritesNullOdds) {
  test::TempDir dir;
  const std::string squad = squad_config(dir);
  dir.write("v2.json", R"({"version": "v2.0", "data": [{"title": "x", "paragraphs": [
      {"context": "w1 key w2 w3", "qas": [
        {"id": "a", "question": "what follows the key ?", "is_impossible": false,
         "answers": [{"text": "w2", "answer_start": 7}]},
        {"id": "b", "question": "what follows the key ?", "is_impossible": true,
         "answers": []}]}]}]})");
  const auto metrics = dir.path() / "m.jsonl";
  const auto r = test::run_polyhal(
      fmt::format("run --config {} --metrics-out {} --set finetune.eval_file=v2.json "
                  "--set finetune.do=eval --set model.preset=tiny",
                  squad, metrics.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("SQuAD v2.0"), std::string::npos) << r.output;
  const auto evaluation = test::metric_records(metrics, "eval").at(0);
  EXPECT_EQ(evaluation["HasAns_total"], 1);
  EXPECT_EQ(evaluation["NoAns_total"], 1);
  EXPECT_EQ(evaluation["total"], 2);
  const auto odds = read_json(dir.path() / "out/eval/null_odds.json");
  EXPECT_TRUE(odds.contains("a") && odds.contains("b")) << odds;
}

TEST(SquadTask, InferenceBenchmarkRunsTheQuestionAnsweringHead) {
  const auto r = test::run_polyhal(
      "run --config " + std::string(POLYHAL_SOURCE_DIR) +
      "/configs/squad-inference-bert-base-seq128-cpu.yaml --set model.preset=tiny "
      "--set inference.iterations=2 --set batch.micro=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("head question_answering, seq 128, batch 2"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("measured:"), std::string::npos) << r.output;
}

TEST(FinetuneTasks, BadInputNamesFileLineAndKey) {
  test::TempDir dir;
  const std::string glue = glue_config(dir);
  // A label outside MRPC's {0, 1}.
  dir.write("bad.tsv",
            "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tw1 good\tw2 good\n"
            "7\t3\t4\tw1 bad\tw2 good\n");
  auto r = test::run_polyhal("run --config " + glue + " --set finetune.eval_file=bad.tsv");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.tsv:3"), std::string::npos) << r.output;
  // A SQuAD key under task glue.
  r = test::run_polyhal("run --config " + glue + " --set finetune.n_best_size=5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("key 'finetune.n_best_size': used by task squad only"), std::string::npos)
      << r.output;
  // Fewer rows than one global batch.
  r = test::run_polyhal("run --config " + glue + " --set batch.micro=4096");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("fewer than one global batch"), std::string::npos) << r.output;
  // A classifier fine-tuned for three labels into a two-label task.
  BertConfig tiny = bert_preset("tiny");
  tiny.vocab_size = 64;
  const TaskHead three_labels{TaskHead::Kind::classification, 3, {}};
  write_safetensors(init_bert_weights(tiny, 0, three_labels), DType::f32,
                    dir.path() / "three.safetensors");
  r = test::run_polyhal("run --config " + glue + " --set checkpoint.init=three.safetensors");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("the file was fine-tuned for 3 labels"), std::string::npos) << r.output;

  // Malformed SQuAD JSON names the file and the JSON path.
  const std::string squad = squad_config(dir);
  dir.write("broken.json", R"({"version": "1.1", "data": [{"paragraphs": [{"context": "w1 w2",
      "qas": [{"id": "a", "question": "what", "answers": [{"text": "w2"}]}]}]}]})");
  r = test::run_polyhal("run --config " + squad + " --set finetune.eval_file=broken.json");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("broken.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("data[0].paragraphs[0].qas[0].answers[0]"), std::string::npos)
      << r.output;
  // Packing: SQuAD only, a known algorithm, at most 64 to a row.
  for (const auto& [set, message] : std::vector<std::pair<std::string, std::string>>{
           {"finetune.packing_algorithm=best", "expected spfhp or nnlshp, got \"best\""},
           {"finetune.max_sequences_per_pack=65", "at most 64 sequences share a row"}}) {
    r = test::run_polyhal("validate --config " + squad + " --set " + set);
    EXPECT_EQ(r.exit_code, 2) << set << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << set << r.output;
  }
  r = test::run_polyhal("validate --config " + glue + " --set finetune.packed=true");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("key 'finetune.packed': used by task squad only"), std::string::npos)
      << r.output;
  // An answer that is not where answer_start says: counted, shown, skipped.
  dir.write("moved.json", R"({"version": "1.1", "data": [{"title": "x", "paragraphs": [
      {"context": "w1 key w2", "qas": [{"id": "a", "question": "what", "answers": [
      {"text": "w2", "answer_start": 0}]}, {"id": "b", "question": "what", "answers": [
      {"text": "w2", "answer_start": 7}]}]}]}]})");
  r = test::run_polyhal("run --config " + squad +
                        " --set finetune.eval_file=moved.json --set finetune.do=eval");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 answer not found at their answer_start"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\"w2\" is not at offset 0"), std::string::npos) << r.output;
}

// The seeds' schedule terms: fractional epochs (Habana's 0.5) take that share
// of an epoch's steps, the last epoch partial and evaluated at its end; a
// step cap ends the schedule early.
TEST(GlueTask, FractionalEpochsAndAStepCap) {
  test::TempDir dir;
  const std::string config = glue_config(dir, "", 1);
  const auto run = [&](const std::string& name, const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_polyhal(
        fmt::format("run --config {} --metrics-out {} {}", config, metrics.string(), sets));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return metrics;
  };
  // 3000 rows in global batches of 32: 93 steps per epoch.
  const auto half = run("half", "--set finetune.epochs=1.5");
  EXPECT_EQ(test::metric_records(half, "step").size(), 139u) << "93 + floor(0.5 x 93)";
  const auto evals = test::metric_records(half, "eval");
  ASSERT_EQ(evals.size(), 2u);
  EXPECT_EQ(evals[0]["step"], 93);
  EXPECT_EQ(evals[1]["step"], 139);
  const auto capped = run("capped", "--set finetune.epochs=3 --set finetune.max_steps=50");
  EXPECT_EQ(test::metric_records(capped, "step").size(), 50u);
  ASSERT_EQ(test::metric_records(capped, "eval").size(), 1u);
  EXPECT_EQ(test::metric_records(capped, "eval")[0]["step"], 50);
  // The schedule ends at the cap: the last step's rate is the end rate (0).
  EXPECT_EQ(test::metric_records(capped, "step").back()["learning_rate"].get<double>(), 0.0);
  const auto bad = test::run_polyhal("validate --config " + config + " --set finetune.epochs=0");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("key 'finetune.epochs': expected a number of epochs in (0, 1e6]"),
            std::string::npos)
      << bad.output;
}

// data.shuffle: false trains the rows in file order every epoch, as a
// reference trainer iterating over the file does (bench/pretrain_parity):
// data.seed then changes nothing; shuffled, it changes the order.
TEST(GlueTask, WithoutShuffleTrainsTheRowsInFileOrder) {
  test::TempDir dir;
  const std::string config = glue_config(dir, "", 1);
  const auto losses = [&](const std::string& name, const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_polyhal(fmt::format(
        "run --config {} --metrics-out {} --set finetune.max_steps=4 --set finetune.do=train {}",
        config, metrics.string(), sets));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<double> out;
    for (const auto& e : test::metric_records(metrics, "step"))
      out.push_back(e["loss"].get<double>());
    return out;
  };
  const auto file_order = losses("a", "--set data.shuffle=false --set data.seed=1");
  ASSERT_EQ(file_order.size(), 4u);
  EXPECT_EQ(file_order, losses("b", "--set data.shuffle=false --set data.seed=2"));
  EXPECT_NE(losses("c", "--set data.seed=1"), losses("d", "--set data.seed=2"));
}

// A multi-stage recipe: phase 1, phase 2 from phase 1's export (a longer
// sequence), GLUE from phase 2's export; finished stages are skipped, an
// interrupted one resumes exactly from its checkpoint, and a stage that
// starts from nothing an earlier stage writes is refused by validate.
TEST(Recipe, RunsStagesInOrderSkipsFinishedOnesAndResumesAnInterruptedOne) {
  test::TempDir dir;
  glue_config(dir, "", 1);
  const std::string pretrain =
      "backend: cpu\ntask: pretrain\nbatch: {micro: 8}\ndata: {source: pattern, max_predictions: "
      "3}\noptimizer: {name: adamw, learning_rate: 0.005}\n";
  dir.write("p1.yaml", pretrain +
                           "model: {preset: tiny, seq_len: 32, vocab_size: 64, dropout: 0}\n"
                           "steps: 10\ncheckpoint: {dir: p1}\n");
  dir.write("p2.yaml", pretrain +
                           "model: {preset: tiny, seq_len: 64, vocab_size: 64, dropout: 0}\n"
                           "steps: 6\ncheckpoint: {dir: p2, every: 3, init: p1/hf}\n");
  const auto recipe =
      dir.write("recipe.yaml",
                "dir: state\nstages:\n  - name: phase1\n    config: p1.yaml\n  - name: phase2\n"
                "    config: p2.yaml\n  - name: mrpc\n    config: glue.yaml\n"
                "    set: {checkpoint.init: p2/hf, finetune.max_steps: 5}\n");
  const auto run = [&](const std::string& file) {
    return test::run_command("cd " + dir.path().string() + " && " + POLYHAL_LAUNCHER + " run " +
                             file + " 2>&1");
  };
  auto r = run("recipe.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"stage 1/3 phase1: ", "stage 2/3 phase2: ", "stage 3/3 mrpc: ",
                           "recipe recipe.yaml: 3 stages"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  EXPECT_NE(r.output.find("pretrain, 6 steps, final loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("glue, 5 steps"), std::string::npos) << r.output;
  // The summary has fine-tuning's evaluation too (issue 54, item 12).
  EXPECT_NE(r.output.find("accuracy "), std::string::npos) << r.output;
  for (const char* stage : {"phase1", "phase2", "mrpc"})
    EXPECT_TRUE(
        std::filesystem::exists(dir.path() / "state" / (std::string(stage) + ".done.json")));
  const auto phase2 = test::step_records(dir.path() / "state/phase2.metrics.jsonl");
  ASSERT_EQ(phase2.size(), 6u);
  // Run again: nothing to do.
  r = run("recipe.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stage 3/3 mrpc: finished before"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("resumed"), std::string::npos) << r.output;
  // As if killed in phase 2 after its step-3 checkpoint.
  for (const char* gone :
       {"state/phase2.done.json", "state/mrpc.done.json", "p2/checkpoint-00000006.safetensors"})
    std::filesystem::remove(dir.path() / gone);
  std::filesystem::remove_all(dir.path() / "p2/hf");
  r = run("recipe.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stage 1/3 phase1: finished before"), std::string::npos) << r.output;
  const auto resumed = test::step_records(dir.path() / "state/phase2.metrics.jsonl");
  ASSERT_EQ(resumed.size(), 3u) << r.output;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(resumed[i]["step"], phase2[i + 3]["step"]);
    EXPECT_EQ(resumed[i]["loss"], phase2[i + 3]["loss"]) << "the resumed steps are the same";
  }
  // Phase 2 alone starts from nothing anyone writes.
  dir.write("alone.yaml",
            "dir: state2\nstages:\n  - name: phase2\n    config: p2.yaml\n"
            "    set: {checkpoint.init: p9/hf}\n");
  r = test::run_command("cd " + dir.path().string() + " && " + POLYHAL_LAUNCHER +
                        " validate alone.yaml 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("alone.yaml:5 (stages[0].set checkpoint.init): key 'checkpoint.init': "
                          "stage 'phase2' starts from " +
                          (dir.path() / "p9/hf").string() +
                          ", which does not exist and no earlier stage writes it (it is the first "
                          "stage)"),
            std::string::npos)
      << r.output;
  // config show takes a recipe: each stage's resolved config.
  r = test::run_command("cd " + dir.path().string() + " && " + POLYHAL_LAUNCHER +
                        " config show recipe.yaml 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stage 3/3 mrpc (glue.yaml):"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("finetune.max_steps"), std::string::npos) << r.output;
  // A model file an earlier stage writes: checkpoint.init reads it.
  dir.write("hf.yaml",
            "dir: state3\nstages:\n  - name: phase1\n    config: p1.yaml\n"
            "    set: {checkpoint.dir: p7}\n  - name: mrpc\n    config: glue.yaml\n"
            "    set: {model.hf_config: p7/hf/config.json}\n");
  r = test::run_command("cd " + dir.path().string() + " && " + POLYHAL_LAUNCHER +
                        " validate hf.yaml 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("which stage 'phase1' writes: start from it with checkpoint.init: "),
            std::string::npos)
      << r.output;
  dir.write("typo.yaml", "dir: s\nstages:\n  - name: a\n    confg: p1.yaml\n");
  r = test::run_command("cd " + dir.path().string() + " && " + POLYHAL_LAUNCHER +
                        " validate typo.yaml 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("typo.yaml:4: key 'stages[0].confg': unknown key in a recipe"),
            std::string::npos)
      << r.output;
}

// Issue 53 item 20: two fine-tunings on one finetune.output_dir both exited
// 0, one's model replacing the other's: the second is refused, naming the
// first, as on one checkpoint.dir.
TEST(FinetuneTasks, ASecondFineTuningOnOneOutputDirIsRefused) {
  test::TempDir dir;
  const auto config = glue_config(dir, "", 1000);
  const auto lock = (dir.path() / "out" / ".polyhal.lock").string();
  const std::string first = std::string(POLYHAL_LAUNCHER) + " run --config " + config;
  const auto r = test::run_command(
      "cd " + dir.path().string() + " && bash -c '" + first +
      " > first.out 2>&1 & pid=$!; for i in $(seq 300); do grep -q pid " + lock +
      " 2>/dev/null && break; sleep 0.1; done; " + first +
      " --set finetune.epochs=1; code=$?; kill $pid; wait $pid; echo \"second exit $code\"'");
  EXPECT_NE(r.output.find("second exit 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("finetune.output_dir " + (dir.path() / "out").string() +
                          " is in use by another run (pid "),
            std::string::npos)
      << r.output;
}

// finetune.do: eval needs no training file, and evaluates in f16 on a CPU
// as inference does (f16 products of f32 tensors), as docs/bert.md says
// (issue 54, item 9): the predictions are f32's but for near ties.
TEST(SquadTask, EvaluationAloneRunsWithoutATrainingFileAndInF16) {
  test::TempDir dir;
  squad_config(dir);
  std::map<std::string, nlohmann::json> predictions;
  for (const std::string precision : {"f32", "f16"}) {
    const auto config =
        dir.write("eval-" + precision + ".yaml",
                  "backend: cpu\ntask: squad\nmodel: {preset: mini, seq_len: 32, vocab_size: 64, "
                  "precision: " +
                      precision +
                      "}\ndata: {vocab: vocab.txt}\nbatch: {micro: 32}\n"
                      "finetune: {do: [eval], eval_file: dev.json, output_dir: out-" +
                      precision + ", max_query_length: 8}\n");
    const auto r = test::run_polyhal("run --config " + config.string());
    ASSERT_EQ(r.exit_code, 0) << precision << ": " << r.output;
    EXPECT_EQ(r.output.find("train_file"), std::string::npos) << r.output;
    predictions[precision] = read_json(dir.path() / ("out-" + precision) / "eval/predictions.json");
  }
  ASSERT_EQ(predictions["f32"].size(), predictions["f16"].size());
  std::size_t same = 0;
  for (const auto& [id, text] : predictions["f32"].items()) same += predictions["f16"][id] == text;
  EXPECT_GE(same * 10, predictions["f32"].size() * 9)
      << same << " of " << predictions["f32"].size() << " predictions equal";
}

// GLUE's diagnostic set AX is predicted with an MNLI model, in MNLI's labels
// (issue 54, item 14); it has nothing to train or evaluate on.
TEST(GlueTask, AxIsPredictedWithAnMnliModel) {
  test::TempDir dir;
  test::write_synthetic_vocab(dir);
  std::mt19937 rng(7);
  const char* labels[] = {"contradiction", "entailment", "neutral"};
  std::string mnli =
      "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
      "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n";
  for (int r = 0; r < 64; ++r)
    mnli += fmt::format("{}\t{}\t{}\tfiction\t-\t-\t-\t-\t{} {}\t{}\t{}\t{}\n", r, r, r,
                        test::synthetic_word(rng), test::synthetic_word(rng),
                        test::synthetic_word(rng), labels[r % 3], labels[r % 3]);
  dir.write("train.tsv", mnli);
  std::string ax = "index\tsentence1\tsentence2\n";
  for (int r = 0; r < 10; ++r)
    ax += fmt::format("{}\t{} {}\t{}\n", r, test::synthetic_word(rng), test::synthetic_word(rng),
                      test::synthetic_word(rng));
  dir.write("AX.tsv", ax);
  const std::string common =
      "backend: cpu\ntask: glue\nmodel: {preset: tiny, seq_len: 32, vocab_size: 64}\n"
      "data: {vocab: vocab.txt}\nbatch: {micro: 8}\n";
  const auto train =
      dir.write("mnli.yaml", common +
                                 "finetune: {glue_task: mnli, train_file: train.tsv, output_dir: "
                                 "mnli, max_steps: 2}\n");
  auto r = test::run_polyhal("run --config " + train.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto predict =
      dir.write("ax.yaml", common +
                               "checkpoint: {init: mnli/model}\nfinetune: {glue_task: ax, do: "
                               "[predict], predict_file: AX.tsv, output_dir: ax}\n");
  r = test::run_polyhal("run --config " + predict.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir.path() / "ax/predict/predictions.tsv");
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 11u) << "a header and the 10 AX rows";
  EXPECT_EQ(rows[0], "index\tprediction");
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto label = rows[i].substr(rows[i].find('\t') + 1);
    EXPECT_TRUE(label == "contradiction" || label == "entailment" || label == "neutral") << label;
  }
  // Issue 72, item 6: the same model with its classes in transformers'
  // MNLI order (id2label entailment, neutral, contradiction, in capitals, and
  // the classifier's rows permuted alike) predicts the same labels: the
  // names come from the model, not from the class index.
  const auto permuted = dir.path() / "mnli-permuted";
  std::filesystem::copy(dir.path() / "mnli/model", permuted,
                        std::filesystem::copy_options::recursive);
  auto hf = read_json(permuted / "config.json");
  const int order[] = {1, 2, 0};  // new class k is the old class order[k]
  const char* names[] = {"ENTAILMENT", "NEUTRAL", "CONTRADICTION"};
  hf["id2label"] = nlohmann::json::object();
  hf["label2id"] = nlohmann::json::object();
  for (int k = 0; k < 3; ++k) {
    hf["id2label"][std::to_string(k)] = names[k];
    hf["label2id"][names[k]] = k;
  }
  std::ofstream(permuted / "config.json") << hf.dump(2);
  TensorMap weights = read_safetensors(permuted / "model.safetensors");
  for (const char* name : {"classifier.weight", "classifier.bias"}) {
    HostTensor& t = weights.at(name);
    const std::size_t width = t.values.size() / 3;
    std::vector<float> moved(t.values.size());
    for (std::size_t k = 0; k < 3; ++k)
      std::copy_n(t.values.begin() + static_cast<std::ptrdiff_t>(order[k] * width), width,
                  moved.begin() + static_cast<std::ptrdiff_t>(k * width));
    t.values = moved;
  }
  write_safetensors(weights, DType::f32, permuted / "model.safetensors");
  const auto again = dir.write(
      "ax-permuted.yaml", common +
                              "checkpoint: {init: mnli-permuted}\nfinetune: {glue_task: ax, do: "
                              "[predict], predict_file: AX.tsv, output_dir: ax-permuted}\n");
  r = test::run_polyhal("run --config " + again.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in_permuted(dir.path() / "ax-permuted/predict/predictions.tsv");
  std::vector<std::string> permuted_rows;
  for (std::string line; std::getline(in_permuted, line);) permuted_rows.push_back(line);
  EXPECT_EQ(permuted_rows, rows);
  const auto wrong = dir.write(
      "ax-train.yaml", common + "finetune: {glue_task: ax, train_file: AX.tsv, output_dir: x}\n");
  r = test::run_polyhal("validate --config " + wrong.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("ax is GLUE's diagnostic test set, without labels"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace polyhal
