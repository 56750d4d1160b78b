// Hardening, round 3 (issue 53): each problem the third hostile probe found,
// fed as input, with the message and the exit code it must give. Items not
// here are not fixed yet.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/json_input.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/tf_bert_weights.hpp"
#include "polyhal/app/tfrecord_data.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

/// The crafted TensorFlow checkpoints (tests/data/hostile_tf/make_hostile_checkpoints.py).
const std::filesystem::path hostile =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/hostile_tf";

/// A tiny f32 BERT inference config on generated data, DIR/i.yaml.
std::filesystem::path tiny_inference(const test::TempDir& dir,
                                     const std::string& inference = "{iterations: 1, warmup: 0}") {
  return dir.write("i.yaml",
                   "backend: cpu\ntask: inference\nmodel: {preset: tiny, seq_len: 16, precision: "
                   "f32}\nbatch: {micro: 2}\ndata: {source: generated}\ninference: " +
                       inference + "\n");
}

// Item 6: generated and pattern pre-training data draw words past the
// special tokens; a vocabulary of 5 has none (it was SIGFPE, and validate
// said ok).
TEST(HardeningRound3, GeneratedDataWithNoWordsInTheVocabularyIsRefused) {
  test::TempDir dir;
  const auto config = dir.write(
      "v.yaml",
      "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, vocab_size: 5, precision: "
      "f32}\nbatch: {micro: 2}\ndata: {source: pattern, max_predictions: 3}\nsteps: 1\n");
  for (const std::string command : {"validate", "run"}) {
    for (const std::string source : {"pattern", "generated"}) {
      const auto r = test::run_polyhal(command + " --config " + config.string() +
                                       " --set data.source=" + source);
      EXPECT_EQ(r.exit_code, 2) << command << " " << source << "\n" << r.output;
      EXPECT_NE(r.output.find("v.yaml:3: key 'model.vocab_size': " + source +
                              " data draws words past the special tokens (ids 0-4), so it needs "
                              "a vocabulary of at least 6, got 5"),
                std::string::npos)
          << r.output;
    }
  }
  const auto six =
      test::run_polyhal("run --config " + config.string() + " --set model.vocab_size=6");
  EXPECT_EQ(six.exit_code, 0) << six.output;
}

// Item 2: JSON nested 200,000 deep crashed whatever printed it (a message,
// a report cell). Every JSON input is parsed with its nesting capped.
std::string deeply_nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(HardeningRound3, DeeplyNestedJsonIsRefusedWhereverItIsRead) {
  test::TempDir dir;
  const std::string deep = deeply_nested(200000);
  const std::string message = "JSON nested deeper than 64 levels";
  // A model's config.json (model.hf_config), through validate and run.
  dir.write("model/config.json", "{\"hidden_size\": " + deep + "}");
  const auto config =
      dir.write("c.yaml",
                "backend: cpu\ntask: inference\nmodel: {hf_config: model/config.json, "
                "seq_len: 16}\ninference: {iterations: 1}\n");
  for (const std::string command : {"validate", "run"}) {
    const auto r = test::run_polyhal(command + " --config " + config.string());
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
    EXPECT_NE(r.output.find("config.json: " + message), std::string::npos) << r.output;
  }
  // A safetensors header's dtype.
  const std::string header =
      "{\"w\":{\"dtype\":" + deep + ",\"shape\":[1],\"data_offsets\":[0,4]}}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  const auto weights = dir.write("w.safetensors", bytes + header + std::string(4, '\0'));
  try {
    read_safetensors(weights);
    ADD_FAILURE() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("w.safetensors: bytes 8-"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
  // A metrics file's record, for the report.
  const auto metrics = dir.write("m.jsonl", "{\"event\":\"summary\",\"x\":" + deep + "}\n");
  const auto report =
      test::run_polyhal("report " + metrics.string() + " -o " + (dir.path() / "r.html").string());
  EXPECT_EQ(report.exit_code, 2) << report.output;
  EXPECT_NE(report.output.find("m.jsonl:1: not a JSON object"), std::string::npos) << report.output;
  // The helper itself: 64 levels read, 65 refused; excerpts stay short.
  EXPECT_NO_THROW(parse_json_input(deeply_nested(64), "x"));
  EXPECT_THROW(parse_json_input(deeply_nested(65), "x"), ConfigError);
  EXPECT_TRUE(parse_json_input_or_discarded(deep).is_discarded());
  EXPECT_EQ(json_excerpt(nlohmann::json(std::string(500, 'a')), 10), "\"aaaaaaaaa...");
}

// Item 1: two records whose steps (or losses) are adjacent doubles made the
// report's tick loop stop moving and allocate forever. Huge values too.
TEST(HardeningRound3, ReportOfAdjacentDoublesEndsWithAPage) {
  test::TempDir dir;
  const std::vector<std::string> files{
      "{\"event\":\"step\",\"step\":1,\"loss\":1.0}\n"
      "{\"event\":\"step\",\"step\":1.0000000000000002,\"loss\":1.0000000000000002}\n",
      "{\"event\":\"step\",\"step\":1e300,\"loss\":2}\n"
      "{\"event\":\"step\",\"step\":1.0000000000000002e300,\"loss\":3}\n",
      "{\"event\":\"step\",\"step\":-1e308,\"loss\":1e-300}\n"
      "{\"event\":\"step\",\"step\":1e308,\"loss\":1e300}\n"};
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto metrics = dir.write("m" + std::to_string(i) + ".jsonl", files[i]);
    const auto page = dir.path() / ("r" + std::to_string(i) + ".html");
    const auto r = test::run_command("timeout 30 " + std::string(POLYHAL_LAUNCHER) + " report " +
                                     metrics.string() + " -o " + page.string() + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << files[i] << r.output;
    EXPECT_TRUE(std::filesystem::exists(page)) << files[i];
  }
}

// Item 9: model.weights with a NaN or infinity gave null embeddings, exit 0.
TEST(HardeningRound3, InferenceWeightsWithANanAreRefusedByName) {
  test::TempDir dir;
  const auto config = tiny_inference(dir);
  const auto saved = test::run_polyhal("run --config " + config.string() +
                                       " --set model.save=" + (dir.path() / "m").string());
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  TensorMap weights = read_safetensors(dir.path() / "m" / "model.safetensors");
  weights.at("bert.encoder.layer.0.output.dense.weight").values.at(7) =
      std::numeric_limits<float>::quiet_NaN();
  save_bert_weights(weights, DType::f32, dir.path() / "nan.safetensors");
  for (const std::string heads : {"false", "true"}) {
    const auto r = test::run_polyhal("run --config " + config.string() + " --set model.weights=" +
                                     (dir.path() / "nan.safetensors").string() +
                                     " --set model.heads=" + heads);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("key 'model.weights': " + (dir.path() / "nan.safetensors").string() +
                            ": tensor 'bert.encoder.layer.0.output.dense.weight' holds nan at "
                            "element 7"),
              std::string::npos)
        << r.output;
  }
}

// Item 5: a step past 8 digits (convert of a TF checkpoint whose
// global_step is 1e8 or more) wrote a name the resume scan never found.
TEST(HardeningRound3, CheckpointsPastEightDigitsAreFoundAndKeptInStepOrder) {
  test::TempDir dir;
  for (const char* name :
       {"checkpoint-99999999.safetensors", "checkpoint-100000000.safetensors",
        "checkpoint-00000007.safetensors", "checkpoint-1234567890123456789.safetensors"})
    dir.write(name, "x");
  const CheckpointStore store(dir.path());
  EXPECT_EQ(store.path(100000000).filename(), "checkpoint-100000000.safetensors");
  ASSERT_TRUE(store.latest());
  EXPECT_EQ(store.latest()->filename(), "checkpoint-100000000.safetensors")
      << "the 19-digit name is no step an int64 holds, and is never read";
  store.remove_all_but_newest(2);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "checkpoint-100000000.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "checkpoint-99999999.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "checkpoint-00000007.safetensors"));
}

// Item 26: a single token type against generated or pattern data, whose
// second sentence is token type 1 (it was a kernel error, exit 1, no key).
TEST(HardeningRound3, OneTokenTypeAgainstTwoSentenceDataIsRefusedByKey) {
  test::TempDir dir;
  const auto config =
      dir.write("t.yaml",
                "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, vocab_size: 64, "
                "type_vocab_size: 1, precision: f32}\nbatch: {micro: 2}\ndata: {source: pattern, "
                "max_predictions: 3}\nsteps: 1\n");
  for (const std::string command : {"validate", "run"}) {
    const auto r = test::run_polyhal(command + " --config " + config.string());
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
    EXPECT_NE(r.output.find("t.yaml:3: key 'model.type_vocab_size': pattern data has two "
                            "sentences per sequence"),
              std::string::npos)
        << r.output;
  }
}

// Item 27: optimizer.step_list out of order: an entry that would never
// apply (it was accepted silently).
TEST(HardeningRound3, AStepListOutOfOrderIsRefusedAtItsLine) {
  test::TempDir dir;
  const auto config =
      dir.write("s.yaml",
                "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, vocab_size: 64}\n"
                "data: {source: pattern}\nsteps: 1\noptimizer:\n  schedule: steps\n"
                "  step_list: [[20, 0.1], [10, 0.01]]\n");
  const auto r = test::run_polyhal("validate --config " + config.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("s.yaml:8: key 'optimizer.step_list': from_step 10 comes after 20"),
            std::string::npos)
      << r.output;
  const auto same = test::run_polyhal("validate --config " + config.string() +
                                      " --set 'optimizer.step_list=[[20, 0.1], [20, 0.01]]'");
  EXPECT_EQ(same.exit_code, 2) << same.output;
  const auto sorted = test::run_polyhal("validate --config " + config.string() +
                                        " --set 'optimizer.step_list=[[10, 0.1], [20, 0.01]]'");
  EXPECT_EQ(sorted.exit_code, 0) << sorted.output;
}

// Item 28: supervise of a command that is not there is a usage error
// (exit 2) naming it, not the plugin/device code 3.
TEST(HardeningRound3, SupervisingAMissingCommandIsAUsageError) {
  for (const std::string command : {"no-such-command-polyhal", "/nonexistent/job"}) {
    const auto r = test::run_polyhal("supervise --max-restarts 1 -- " + command + " arg");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("supervise: '" + command + "' is not a command here"),
              std::string::npos)
        << r.output;
  }
  EXPECT_EQ(test::run_polyhal("supervise --max-restarts 0 -- true").exit_code, 0);
}

// Item 10: an output path that is a device or FIFO was replaced by a
// regular file (the temporary renamed over it). A link to /dev/null stands
// for the device: were it replaced, the link would go, never /dev/null.
TEST(HardeningRound3, AnOutputThatIsADeviceOrFifoIsWrittenNotReplaced) {
  test::TempDir dir;
  const auto metrics = dir.write("m.jsonl", "{\"event\":\"step\",\"step\":1,\"loss\":1.0}\n");
  const auto null_link = dir.path() / "null";
  std::filesystem::create_symlink("/dev/null", null_link);
  auto r = test::run_polyhal("report " + metrics.string() + " -o " + null_link.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::is_symlink(null_link));
  EXPECT_TRUE(std::filesystem::is_character_file(null_link));

  // A FIFO gets the page, read by another process.
  const auto fifo = dir.path() / "page.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto read = dir.path() / "read.html";
  r = test::run_command("(timeout 60 cat " + fifo.string() + " > " + read.string() + " &) && " +
                        POLYHAL_LAUNCHER + " report " + metrics.string() + " -o " + fifo.string() +
                        " 2>&1; sleep 0.2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_GT(std::filesystem::file_size(read), 1000u);

  // A directory is named; nothing is written into or over it.
  const auto subdir = dir.path() / "sub";
  std::filesystem::create_directory(subdir);
  r = test::run_polyhal("report " + metrics.string() + " -o " + subdir.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(subdir.string() + ": is a directory; name the file to write"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(subdir));
}

// Item 11: model.save in a training task wrote nothing (exit 0); a
// pre-training run with it and no checkpoint.dir lost its trained weights.
TEST(HardeningRound3, ModelSaveOfATrainingTaskIsItsExport) {
  test::TempDir dir;
  const auto config =
      dir.write("p.yaml",
                "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, precision: f32, "
                "vocab_size: 256, num_hidden_layers: 2}\nbatch: {micro: 8}\n"
                "data: {source: pattern, seed: 5, max_predictions: 6}\n"
                "optimizer: {name: lamb, learning_rate: 0.004}\nsteps: 3\n");
  const auto saved = dir.path() / "trained";
  const auto validate =
      test::run_polyhal("validate " + config.string() + " --set model.save=" + saved.string());
  EXPECT_EQ(validate.exit_code, 0) << validate.output;
  EXPECT_NE(validate.output.find("exports the final weights to " + saved.string()),
            std::string::npos)
      << validate.output;
  const auto r =
      test::run_polyhal("run " + config.string() + " --set model.save=" + saved.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::is_regular_file(saved / "config.json")) << r.output;
  const TensorMap weights = read_safetensors(saved / "model.safetensors");
  EXPECT_TRUE(weights.contains("bert.embeddings.word_embeddings.weight"));
}

// Item 8: eval.micro escaped the bounds batch.micro has: validate with
// eval.micro 268435456 allocated until bad_alloc, and the memory plan left
// the evaluation out. Now its tensors are bounded naming eval.micro, and its
// model is in the plan.
TEST(HardeningRound3, EvalMicroIsBoundedAndPlannedAsBatchMicroIs) {
  const std::string config =
      std::string(POLYHAL_SOURCE_DIR) + "/configs/pretrain-bert-base-phase1-cpu.yaml";
  const std::string eval = " --set eval.source=generated --set eval.every_steps=10";
#if defined(__SANITIZE_ADDRESS__)
  const std::string limit;
#else
  const std::string limit = "ulimit -v 2097152; ";
#endif
  const auto huge = test::run_command(limit + POLYHAL_LAUNCHER + " validate --skip-inputs " +
                                      config + eval + " --set eval.micro=268435456 2>&1");
  EXPECT_EQ(huge.exit_code, 2) << huge.output;
  EXPECT_NE(huge.output.find("--set eval.micro=268435456: key 'eval.micro': evaluation batches "
                             "of 268435456 sequences of 128 tokens: tensor 'input_ids'"),
            std::string::npos)
      << huge.output;
  const auto planned =
      test::run_polyhal("run --compile-only " + config + eval +
                        " --set eval.micro=64 --set model.precision=f32");  // any CPU tier
  EXPECT_EQ(planned.exit_code, 0) << planned.output;
  EXPECT_NE(planned.output.find("evaluation: f32"), std::string::npos) << planned.output;
  EXPECT_NE(planned.output.find("evaluation: i32"), std::string::npos) << planned.output;
}

// Item 12: run allocated past a plan that validate reported as not
// fitting. A device model's memory is the same on every machine.
TEST(HardeningRound3, RunRefusesAPlanThatDoesNotFitBeforeAllocating) {
  test::TempDir dir;
  const auto config = dir.write(
      "i.yaml",
      "backend: ipu\ntask: inference\nmodel: {preset: large, seq_len: 512, precision: f16}\n"
      "batch: {micro: 16}\ndata: {source: generated}\ninference: {iterations: 1, warmup: 0}\n");
  const auto validate = test::run_polyhal("validate " + config.string());
  EXPECT_EQ(validate.exit_code, 1) << validate.output;
  const auto r = test::run_polyhal("run " + config.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("MiB for it: it does not fit, and nothing was allocated"),
            std::string::npos)
      << r.output;
}

// Items 3 and 4: a small TensorFlow checkpoint made the reader decode the
// same bytes again and again until bad_alloc: 100 tensors on one shard's
// same 4 KiB, an index naming its one data block 1000 times
// (tests/data/hostile_tf/make_hostile_checkpoints.py writes both).
TEST(HardeningRound3, TfCheckpointBytesAndBlocksAreReadOnce) {
  test::TempDir dir;
  const auto convert = [&](const std::string& name) {
    return test::run_polyhal("convert --input " + (hostile / name / "model.ckpt").string() +
                             " --bert-config " + POLYHAL_SOURCE_DIR +
                             "/tests/data/tf_checkpoint/google/bert_config.json --output " +
                             (dir.path() / name).string());
  };
  const auto shared = convert("shared");
  EXPECT_EQ(shared.exit_code, 2) << shared.output;
  EXPECT_NE(shared.output.find("shared/model.ckpt.index: tensor 'bert/w0001': with it the index "
                               "places more tensor bytes in "),
            std::string::npos)
      << shared.output;
  EXPECT_NE(shared.output.find("than its 4096 bytes: tensors that share bytes"), std::string::npos)
      << shared.output;
  const auto repeated = convert("repeated");
  EXPECT_EQ(repeated.exit_code, 2) << repeated.output;
  EXPECT_NE(repeated.output.find("repeated/model.ckpt.index"), std::string::npos)
      << repeated.output;
  EXPECT_NE(repeated.output.find("before the end of the block before it"), std::string::npos)
      << repeated.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "shared"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "repeated"));
}

// Item 16: a recipe's NAME.done.json with a wrong-typed field ended the
// recipe with the JSON library's exception, exit 1, naming no file.
TEST(HardeningRound3, AWrongTypedFieldOfADoneMarkerIsNamedAndLeftOut) {
  test::TempDir dir;
  dir.write("p.yaml",
            "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, vocab_size: 64}\n"
            "batch: {micro: 4}\ndata: {source: pattern, max_predictions: 3}\nsteps: 1\n");
  const auto recipe = dir.write("recipe.yaml",
                                "dir: state\nstages:\n  - name: one\n    config: p.yaml\n"
                                "  - name: two\n    config: p.yaml\n");
  std::filesystem::create_directory(dir.path() / "state");
  dir.write("state/one.done.json", "{\"summary\": {\"task\": 5}, \"seconds\": \"abc\"}");
  dir.write("state/two.done.json", "{\"summary\": 5, \"seconds\": 2}");
  const auto r = test::run_command("cd " + dir.path().string() + " && " + POLYHAL_LAUNCHER +
                                   " run " + recipe.string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("state/one.done.json: 'seconds' is not a number; left out"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("state/two.done.json: 'summary' is not an object; left out"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("stage 2/2 two: finished before"), std::string::npos) << r.output;
}

// Item 29: validate said ok for a 7-byte model.weights file.
TEST(HardeningRound3, ValidateReadsTheHeaderOfTheWeightsItStartsFrom) {
  test::TempDir dir;
  const auto weights = dir.write("w.safetensors", "1234567");
  const auto config = tiny_inference(dir);
  const auto r =
      test::run_polyhal("validate " + config.string() + " --set model.weights=" + weights.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'model.weights': " + weights.string() +
                          ": truncated: shorter than the 8-byte header length"),
            std::string::npos)
      << r.output;
}

// Item 22: global_step went through a float: 16777217 became 16777216,
// 2.5 became 2 (tests/data/hostile_tf/make_hostile_checkpoints.py).
TEST(HardeningRound3, TfGlobalStepIsReadExactlyOrRefused) {
  EXPECT_EQ(read_tf_optimizer_state(hostile / "step_int64_16777217/model.ckpt").global_step,
            16777217);
  for (const auto& [name, value] :
       {std::pair{"step_float_2_5", "2.5"}, std::pair{"step_int64_negative", "-5"}}) {
    test::expect_config_error(
        [&] { read_tf_optimizer_state(hostile / name / "model.ckpt"); },
        fmt::format("model.ckpt.data-00000-of-00001: tensor 'global_step' is {}: not a step count",
                    value));
  }
}

// Items 24 and 25: TF layer_01/* and layer_1/* both became layer 1 and one
// was dropped silently; an int8 or string weight was reported as missing.
TEST(HardeningRound3, TfWeightsAreOneToOneAndOfAReadableType) {
  test::expect_config_error([&] { read_tf_bert_weights(hostile / "two_layer_ones/model.ckpt"); },
                            "tensors 'bert/encoder/layer_01/output/dense/bias' and "
                            "'bert/encoder/layer_1/output/dense/bias' are both "
                            "bert.encoder.layer.1.output.dense.bias: one model cannot have both");
  test::expect_config_error(
      [&] { read_tf_bert_weights(hostile / "int8_weight/model.ckpt"); },
      "tensor 'bert/pooler/dense/bias' (bert.pooler.dense.bias) is int8: polyhal reads weights "
      "stored as");
}

// Item 19: a directory holding part-00000-of-00002 alone was trained on as
// the whole TFRecord set (the HDF5 reader refused an incomplete set).
TEST(HardeningRound3, AnIncompleteSetOfTfRecordPartsIsRefused) {
  test::TempDir dir;
  std::filesystem::create_directory(dir.path() / "data");
  dir.write("data/part-00000-of-00002.tfrecord", "");
  const auto config = dir.write("p.yaml",
                                "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32}\n"
                                "batch: {micro: 2}\ndata: {source: tfrecord, files: " +
                                    (dir.path() / "data").string() + "}\nsteps: 1\n");
  const auto r = test::run_polyhal("validate " + config.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data: 1 of 2 part files: the set is incomplete (missing part 1)"),
            std::string::npos)
      << r.output;
}

// Items 18 and 23: convert into a directory holding another model mixed
// the two; --output naming a file gave a raw error; a convert killed or
// cut short by a full disk left a half-written directory and temporaries.
TEST(HardeningRound3, ConvertWritesAWholeModelIntoItsOwnDirectory) {
  test::TempDir dir;
  const std::string convert = "convert --input " + std::string(POLYHAL_SOURCE_DIR) +
                              "/tests/data/tf_checkpoint/google/" + "model.ckpt-7 --output ";
  const auto file = dir.write("a-file", "x");
  auto r = test::run_polyhal(convert + file.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--output " + file.string() + ": is a file; name the directory"),
            std::string::npos)
      << r.output;
  std::filesystem::create_directory(dir.path() / "other");
  dir.write("other/config.json", "{}");
  r = test::run_polyhal(convert + (dir.path() / "other").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("already holds a model (config.json): converting into it would mix two "
                          "models"),
            std::string::npos)
      << r.output;
  // A killed convert's temporary is removed; the model is written whole.
  std::filesystem::create_directory(dir.path() / "new");
  dir.write("new/model.safetensors.tmp.AbC123", "partial");
  r = test::run_polyhal(convert + (dir.path() / "new").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("removed " + (dir.path() / "new/model.safetensors.tmp.AbC123").string() +
                          ": the temporary file of a convert that was stopped"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "new/model.safetensors.tmp.AbC123"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "new/config.json"));
}

// Item 21: one descriptor stayed open per TFRecord file: a set of 1,500
// failed under `ulimit -n 1024`. Here 600 files under a limit of 256.
TEST(HardeningRound3, ATfRecordSetKeepsNoFileOpen) {
  test::TempDir dir;
  const std::filesystem::path data =
      std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/tfrecord";
  const auto source = data / "google/part-00000-of-00002";
  const auto gzip_source = data / "google_gzip/part-00000-of-00001.gz";
  std::filesystem::create_directory(dir.path() / "many");
  std::filesystem::create_directory(dir.path() / "gzip");
  for (int i = 0; i < 600; ++i) {
    std::filesystem::copy_file(source, dir.path() / "many" / fmt::format("shard-{:04d}", i));
    std::filesystem::copy_file(gzip_source,
                               dir.path() / "gzip" / fmt::format("shard-{:04d}.gz", i));
  }
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 256);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  try {
    const TfRecordSet many(dir.path() / "many");
    const TfRecordSet one(source);
    EXPECT_EQ(many.size(), 600 * one.size());
    EXPECT_EQ(many.sample(many.size() - 1).input_ids, one.sample(one.size() - 1).input_ids);
    // GZIP files keep decompressing cursors only while among the 64 read last.
    const TfRecordSet gzip(dir.path() / "gzip");
    for (std::int64_t i = 0; i < gzip.size(); i += 3) (void)gzip.sample(i);
    const TfRecordSet one_gzip(dir.path() / "gzip" / "shard-0000.gz");
    EXPECT_EQ(gzip.size(), 600 * one_gzip.size());
    EXPECT_EQ(gzip.sample(gzip.size() - 1).input_ids,
              one_gzip.sample(one_gzip.size() - 1).input_ids);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  ::setrlimit(RLIMIT_NOFILE, &saved);
}

// Item 14: a GZIP TFRecord of empty records cost ~80 s of CPU per MB at
// open, unbounded: a file that expands a hundredfold is refused.
TEST(HardeningRound3, AGzipTfRecordBombIsRefusedAtOpen) {
  test::TempDir dir;
  const auto crc = [](const unsigned char* data, std::size_t size) {
    std::uint32_t c = 0xffffffffu;
    for (std::size_t i = 0; i < size; ++i) {
      c ^= data[i];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? 0x82f63b78u : 0u);
    }
    c = ~c;
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
  };
  // An empty record: its 8-byte length (0), the length's CRC, the data's CRC.
  std::string record(16, '\0');
  const std::uint32_t length_crc = crc(reinterpret_cast<const unsigned char*>(record.data()), 8);
  const std::uint32_t data_crc = crc(nullptr, 0);
  std::memcpy(record.data() + 8, &length_crc, 4);
  std::memcpy(record.data() + 12, &data_crc, 4);
  {
    std::ofstream raw(dir.path() / "empty.tfrecord", std::ios::binary);
    for (int i = 0; i < 1 << 19; ++i) raw << record;
  }
  ASSERT_EQ(test::run_command("gzip " + (dir.path() / "empty.tfrecord").string()).exit_code, 0);
  test::expect_config_error(
      [&] { TfRecordSet set(dir.path() / "empty.tfrecord.gz"); },
      "the GZIP file expands more than 100 times its size: refused as a decompression bomb");
}

// Item 15: `polyhal report` was quadratic in metric keys (a 229 KB file of
// 16,000 eval keys took about 60 s): now each record is read once and at
// most 200 evaluation charts are drawn, the rest counted.
TEST(HardeningRound3, ReportOfThousandsOfMetricKeysIsQuick) {
  test::TempDir dir;
  std::string keys;
  for (int k = 0; k < 16000; ++k) keys += fmt::format(",\"m{}\":{}", k, k);
  std::string lines = "{\"event\":\"step\",\"step\":1,\"loss\":1.0}\n";
  for (int step = 1; step <= 3; ++step)
    lines += fmt::format("{{\"event\":\"eval\",\"step\":{}{}}}\n", step, keys);
  const auto metrics = dir.write("m.jsonl", lines);
  const auto page = dir.path() / "r.html";
  const auto r = test::run_command("timeout 20 " + std::string(POLYHAL_LAUNCHER) + " report " +
                                   metrics.string() + " -o " + page.string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(page);
  const std::string html{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_NE(html.find("15800 more evaluation metrics are not drawn"), std::string::npos);
}

// Item 13: one SIGTERM or SIGINT did not stop inference, matmul-bench,
// training setup or evaluation (only training steps read it). Outside a
// training loop a signal now ends the run at once, 128 + its number.
TEST(HardeningRound3, OneSignalStopsARunThatHasNoStepToCheckpoint) {
  test::TempDir dir;
  const auto config = tiny_inference(dir, "{duration_seconds: 120, warmup: 0}");
  for (const auto& [signal, code] : {std::pair{"TERM", "143"}, std::pair{"INT", "130"}}) {
    const auto start = std::chrono::steady_clock::now();
    const auto r = test::run_command(std::string("bash -c '") + POLYHAL_LAUNCHER + " run " +
                                     config.string() + " > run.log 2>&1 & pid=$!; sleep 2; kill -" +
                                     signal + " $pid; wait $pid; echo exit $?; cat run.log'");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(r.output.find(std::string("exit ") + code), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("stopping now (no training step in flight to checkpoint)"),
              std::string::npos)
        << r.output;
    EXPECT_LT(seconds, 30.0) << r.output;
  }
}

}  // namespace
}  // namespace polyhal
