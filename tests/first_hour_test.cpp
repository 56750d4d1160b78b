// What a new user meets in the first hour (issue 35): validate's ok means
// run starts, a rerun says what it resumes or that nothing is left to do,
// checkpoints are kept within checkpoint.keep_last, and a training run
// without checkpoint.dir is warned about, and a plan of a config for
// another machine needs none of its data.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "test_support.hpp"

namespace polyhal {
namespace {

namespace fs = std::filesystem;
using test::run_polyhal;

const std::string kDemo = std::string(POLYHAL_SOURCE_DIR) + "/configs/pretrain-demo-cpu.yaml";

TEST(FirstHour, ValidateNamesEveryMissingInputAndOkMeansRunStarts) {
  const test::TempDir dir;
  const auto config = dir.write("squad.yaml",
                                "backend: cpu\n"
                                "task: squad\n"
                                "model:\n  preset: tiny\n  seq_len: 64\n"
                                "data:\n  vocab: missing-vocab.txt\n"
                                "finetune:\n"
                                "  train_file: " +
                                    (dir.path() / "train.json").string() +
                                    "\n"
                                    "  eval_file: /nonexistent/dev.json\n");
  auto r = run_polyhal("validate " + config.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  for (const std::string& part : std::vector<std::string>{
           "3 inputs the config names are missing",
           // Relative paths are read from the current directory, and shown so.
           config.string() + ":7: key 'data.vocab': " +
               (std::filesystem::current_path() / "missing-vocab.txt").string() +
               ": no such file or directory",
           config.string() + ":9: key 'finetune.train_file': " +
               (dir.path() / "train.json").string() + ": no such file",
           config.string() + ":10: key 'finetune.eval_file': /nonexistent/dev.json: no such file"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  // run refuses it alike, before anything starts.
  r = run_polyhal("run " + config.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("3 inputs the config names are missing"), std::string::npos) << r.output;
  // A config written for another machine: --skip-inputs checks the rest.
  r = run_polyhal("validate --skip-inputs " + config.string());
  EXPECT_EQ(r.output.find("inputs the config names are missing"), std::string::npos) << r.output;
  // A TensorFlow checkpoint is named by its prefix: PREFIX.index counts.
  std::ofstream(dir.path() / "model.ckpt-100.index") << "x";
  r = run_polyhal("validate " + kDemo +
                  " --set checkpoint.init=" + (dir.path() / "model.ckpt-100").string() +
                  " --set checkpoint.dir=" + (dir.path() / "ck").string());
  EXPECT_EQ(r.output.find("key 'checkpoint.init': "), std::string::npos) << r.output;
}

TEST(FirstHour, APlanOfPreTrainingOnDataElsewhereNeedsNoData) {
  // BERT-Large phase 2 on TFRecord files of a cluster: validate --skip-inputs
  // and --compile-only plan it from the config, and say so; run refuses it.
  const std::string config = std::string(POLYHAL_SOURCE_DIR) +
                             "/configs/pretrain-bert-large-phase2-gaudi.yaml --set "
                             "data.source=tfrecord --set data.files=/nonexistent/seq_len_512";
  auto r = run_polyhal("validate --skip-inputs " + config);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tfrecord data at /nonexistent/seq_len_512 (not on this machine: "
                          "planned as the config describes it, unpacked rows of 512 tokens"),
            std::string::npos)
      << r.output;
  r = run_polyhal("run --compile-only " + config);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_polyhal("run " + config);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'data.files': /nonexistent/seq_len_512: no such file"),
            std::string::npos)
      << r.output;
}

/// The demo for `steps` steps into `dir`/ck, a checkpoint every step.
test::CommandResult demo(const test::TempDir& dir, int steps, const std::string& extra = "") {
  return run_polyhal(fmt::format(
      "run {} --set steps={} --set checkpoint.every=1 --set checkpoint.dir={} --metrics-out {} {}",
      kDemo, steps, (dir.path() / "ck").string(), (dir.path() / "m.jsonl").string(), extra));
}

TEST(FirstHour, ARerunSaysWhatItResumesOrThatNothingIsLeftAndKeepsTheNewestCheckpoints) {
  const test::TempDir dir;
  auto r = demo(dir, 4, "--set checkpoint.keep_last=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double last_loss = test::step_losses(dir.path() / "m.jsonl").back();
  std::set<std::string> kept;
  for (const auto& entry : fs::directory_iterator(dir.path() / "ck"))
    if (entry.path().extension() == ".safetensors") kept.insert(entry.path().filename().string());
  EXPECT_EQ(kept, (std::set<std::string>{"checkpoint-00000003.safetensors",
                                         "checkpoint-00000004.safetensors"}));
  EXPECT_NE(
      r.output.find("removed " + (dir.path() / "ck" / "checkpoint-00000001.safetensors").string() +
                    " (checkpoint.keep_last 2)"),
      std::string::npos)
      << r.output;

  // Run again as is: nothing to train, and it says so with the loss reached.
  r = demo(dir, 4);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(
                fmt::format("nothing to do: {} is at step 4 of 4", (dir.path() / "ck").string())),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(fmt::format("done before: 4 of 4 steps, final loss {:.4f}", last_loss)),
            std::string::npos)
      << r.output;
  EXPECT_DOUBLE_EQ(test::last_json_line(dir.path() / "m.jsonl")["final_loss"].get<double>(),
                   last_loss);

  // Longer: it resumes, and says from where.
  r = demo(dir, 5);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resuming from step 4 of 5: " +
                          (dir.path() / "ck" / "checkpoint-00000004.safetensors").string()),
            std::string::npos)
      << r.output;

  // Another global batch: resumed all the same, with a warning.
  r = demo(dir, 6, "--set batch.micro=8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("was written by a run with global batch 32 over 1 replicas; this run "
                          "has global batch 16 over 1 replicas"),
            std::string::npos)
      << r.output;
}

TEST(FirstHour, TrainingWithoutACheckpointDirIsWarnedAbout) {
  const test::TempDir dir;
  const auto config = dir.write("demo.yaml",
                                "backend: cpu\ntask: pretrain\nmodel:\n  preset: "
                                "tiny\n  seq_len: 32\n  vocab_size: 256\nbatch:\n  "
                                "micro: 4\ndata:\n  source: pattern\nsteps: 2\n");
  const auto r = run_polyhal("run " + config.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("checkpoint.dir is not set: this run keeps no checkpoint"),
            std::string::npos)
      << r.output;
}

// A key the data source does not read is an error at the key, never a run
// on other data than the user named (issue 54, item 8).
TEST(FirstHour, DataFilesOnAGeneratedSourceIsAnErrorNotRandomTokens) {
  test::TempDir dir;
  const auto config = fs::path(POLYHAL_SOURCE_DIR) / "configs/pretrain-demo-cpu.yaml";
  auto r = run_polyhal("validate --config " + config.string() +
                       " --set data.files=" + dir.path().string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'data.files': read by data.source mlperf_hdf5 and tfrecord only, "
                          "and data.source is pattern"),
            std::string::npos)
      << r.output;
  r = run_polyhal("validate --config " + config.string() +
                  " --set data.text_file=" + (dir.path() / "x.txt").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'data.text_file': read by data.source text only"), std::string::npos)
      << r.output;
}

// `--set key=null` unsets a key the config gives, so a shipped config's
// learning_rate can give way to learning_rate_per_worker (issue 54, item 10).
TEST(FirstHour, SetNullUnsetsAKeySoAnotherCanDecide) {
  test::TempDir dir;
  const auto config = fs::path(POLYHAL_SOURCE_DIR) / "configs/pretrain-demo-cpu.yaml";
  auto r = run_polyhal("config show --config " + config.string() +
                       " --set optimizer.learning_rate_per_worker=0.0002");
  EXPECT_NE(r.exit_code, 0) << "both given: " << r.output;
  r = run_polyhal(
      "config show --config " + config.string() +
      " --set optimizer.learning_rate=null --set optimizer.learning_rate_per_worker=0.0002");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("learning_rate_per_worker"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0.0002"), std::string::npos) << r.output;
  r = run_polyhal("config show --config " + config.string() + " --set optimizer.nothing_here=~");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("the config does not give optimizer.nothing_here, so there is nothing "
                          "to unset"),
            std::string::npos)
      << r.output;
}

// `report --chain`: a recipe's stages follow one another on one step axis
// instead of overlaying at step 1 (issue 54, item 12).
TEST(FirstHour, ReportChainPutsStagesOnOneStepAxis) {
  test::TempDir dir;
  for (const char* name : {"phase1", "phase2"}) {
    std::string lines;
    for (int step = 1; step <= 10; ++step)
      lines +=
          fmt::format(R"({{"event": "step", "step": {}, "loss": {}}})", step, 5.0 - 0.1 * step) +
          "\n";
    dir.write(std::string(name) + ".jsonl", lines);
  }
  const auto page = [&](const std::string& flags) {
    const auto out = dir.path() / "page.html";
    const auto r =
        run_polyhal("report " + flags + " " + (dir.path() / "phase1.jsonl").string() + " " +
                    (dir.path() / "phase2.jsonl").string() + " -o " + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::ifstream in(out);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  EXPECT_NE(page("--chain").find(">20</text>"), std::string::npos) << "the axis reaches step 20";
  EXPECT_EQ(page("").find(">20</text>"), std::string::npos) << "overlaid: both end at step 10";
}

}  // namespace
}  // namespace polyhal
