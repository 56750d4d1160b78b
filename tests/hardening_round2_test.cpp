// Hardening, round 2 (docs/hardening.md): each problem the second hostile
// probe found, fed as input, with the message and the exit code it must give.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/mlperf_hdf5.hpp"
#include "polyhal/app/packing.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const std::string kLargePhase2 =
    std::string(POLYHAL_SOURCE_DIR) + "/configs/pretrain-bert-large-phase2-cpu.yaml";

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer's shadow memory reserves terabytes of address space: no
// address-space limit can apply to it (the normal build's run checks it).
constexpr const char* kAddressSpaceLimit = "";
#else
constexpr const char* kAddressSpaceLimit = "ulimit -v 2097152; ";
#endif

/// The launcher under a 2 GiB address-space limit: a plan that allocated
/// what it plans (gigabytes at these batches) ends in bad_alloc instead.
test::CommandResult under_2gib(const std::string& arguments) {
  return test::run_command(kAddressSpaceLimit + std::string(POLYHAL_LAUNCHER) + " " + arguments);
}

// Item 1: validate and --compile-only plan without allocating the plan:
// "does not fit" (exit 1) at once; a batch whose tensors no kernel can index
// is refused naming the key (exit 2, item 2).
TEST(HardeningRound2, ValidatingABatchThatCannotFitAllocatesNothing) {
  for (const char* micro : {"64", "128"}) {
    const auto r =
        under_2gib("validate --skip-inputs " + kLargePhase2 + " --set batch.micro=" + micro);
    EXPECT_EQ(r.exit_code, 1) << micro << ": " << r.output;
    EXPECT_NE(r.output.find("DOES NOT FIT"), std::string::npos) << r.output;
  }
  const auto compile = under_2gib("run --compile-only " + kLargePhase2 + " --set batch.micro=128");
  EXPECT_EQ(compile.exit_code, 1) << compile.output;
  EXPECT_NE(compile.output.find("kernel scratch not counted"), std::string::npos) << compile.output;
  for (const char* micro : {"512", "1048576"}) {
    const auto r =
        under_2gib("validate --skip-inputs " + kLargePhase2 + " --set batch.micro=" + micro);
    EXPECT_EQ(r.exit_code, 2) << micro << ": " << r.output;
    EXPECT_NE(r.output.find(std::string("--set batch.micro=") + micro +
                            ": key 'batch.micro': " + micro + " sequences of 512 tokens: tensor"),
              std::string::npos)
        << r.output;
  }
}

// The shipped config fits and is planned with every kernel's scratch, still
// without allocating it.
TEST(HardeningRound2, ValidatingABatchThatFitsAllocatesNothingEither) {
  const auto r = under_2gib("validate --skip-inputs " + kLargePhase2);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(": ok (backend cpu, task pretrain;"), std::string::npos) << r.output;
}

// Item 2: products that reach a kernel are bounded (oneDNN indexes with 32
// bits; 2^32 was SIGFPE, exit 136), refused naming the key.
TEST(HardeningRound2, TensorsOverTheKernelLimitAreRefusedNamingTheKey) {
  test::TempDir dir;
  const auto mm = test::run_polyhal("validate --skip-inputs " +
                                    dir.write("mm.yaml",
                                              "backend: cpu\ntask: matmul-bench\n"
                                              "matmul_bench: {shapes: [[4294967296, 1, 1]]}\n")
                                        .string() +
                                    "");
  EXPECT_EQ(mm.exit_code, 2) << mm.output;
  EXPECT_NE(mm.output.find("mm.yaml:3: key 'matmul_bench.shapes[0]': A [4294967296, 1] would "
                           "hold more than 2147483647 elements"),
            std::string::npos)
      << mm.output;
  // A product no input shows: C [2^20, 2^20] from A [2^20, 1] and B [1, 2^20].
  const auto product = test::run_polyhal(
      "validate --skip-inputs " +
      dir.write(
             "mn.yaml",
             "backend: cpu\ntask: matmul-bench\nmatmul_bench: {shapes: [[1048576, 1048576, 1]]}\n")
          .string() +
      "");
  EXPECT_EQ(product.exit_code, 2) << product.output;
  EXPECT_NE(product.output.find("key 'matmul_bench.shapes[0]': C [1048576, 1048576]"),
            std::string::npos)
      << product.output;
  for (const char* config :
       {"inference-bert-base-seq128-cpu.yaml", "pretrain-bert-base-phase1-cpu.yaml"}) {
    const auto r = test::run_polyhal("validate --skip-inputs " + std::string(POLYHAL_SOURCE_DIR) +
                                     "/configs/" + config +
                                     " --set batch.micro=268435456 --set model.seq_len=16");
    EXPECT_EQ(r.exit_code, 2) << config << ": " << r.output;
    EXPECT_NE(r.output.find("--set batch.micro=268435456: key 'batch.micro': 268435456 sequences "
                            "of 16 tokens: tensor 'input_ids' [4294967296] would hold more than "
                            "2147483647 elements"),
              std::string::npos)
        << r.output;
  }
}

// Item 4: local replicas are bounded, and every one of them is in the plan.
TEST(HardeningRound2, LocalReplicasAreBoundedAndEachIsPlanned) {
  const std::string base =
      std::string(POLYHAL_SOURCE_DIR) + "/configs/pretrain-bert-base-phase1-cpu.yaml";
  const auto many = under_2gib("validate --skip-inputs " + base + " --set batch.replicas=1000000");
  EXPECT_EQ(many.exit_code, 2) << many.output;
  EXPECT_NE(many.output.find("--set batch.replicas=1000000: key 'batch.replicas': 1000000 local "
                             "replicas on "),
            std::string::npos)
      << many.output;
  EXPECT_NE(many.output.find("run more as MPI ranks"), std::string::npos) << many.output;
  // Eight replicas of BERT-base hold eight models: the plan says so.
  const auto one = test::run_polyhal("run --compile-only " + base + " --set batch.replicas=1");
  const auto eight = test::run_polyhal("run --compile-only " + base + " --set batch.replicas=8");
  EXPECT_NE(eight.output.find("(x 8 replicas)"), std::string::npos) << eight.output;
  EXPECT_EQ(one.output.find("replicas)"), std::string::npos) << one.output;
}

/// A tiny pre-training run's config in `dir`, with `extra` keys.
std::string tiny_pretrain(const test::TempDir& dir, const std::string& name,
                          const std::string& extra) {
  return dir
      .write(name,
             "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, precision: f32, "
             "vocab_size: 64}\nbatch: {micro: 4}\ndata: {source: pattern, seed: 3, "
             "max_predictions: 3}\noptimizer: {name: lamb, learning_rate: 0.005}\n" +
                 extra)
      .string();
}

// Item 5: a finished run whose export was cut short writes it on a rerun.
TEST(HardeningRound2, AFinishedRunWritesItsMissingExport) {
  test::TempDir dir;
  const auto config = tiny_pretrain(dir, "p.yaml", "steps: 2\ncheckpoint: {dir: ck, every: 2}\n");
  ASSERT_EQ(test::run_polyhal("run --config " + config).exit_code, 0);
  const auto weights = dir.path() / "ck" / "hf" / "model.safetensors";
  ASSERT_TRUE(std::filesystem::exists(weights));
  std::filesystem::remove(weights);  // stopped between the last checkpoint and the export
  const auto again = test::run_polyhal("run --config " + config);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("the run had finished; writing its missing export"),
            std::string::npos)
      << again.output;
  EXPECT_TRUE(std::filesystem::exists(weights));
  // A whole export is left alone.
  const auto time = std::filesystem::last_write_time(weights);
  EXPECT_EQ(test::run_polyhal("run --config " + config).exit_code, 0);
  EXPECT_EQ(std::filesystem::last_write_time(weights), time);
}

// Item 10: optimizer settings that make every step NaN are refused.
TEST(HardeningRound2, OptimizerSettingsOutsideTheirRangeAreRefused) {
  test::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"beta1: 1", "key 'optimizer.beta1': expected a number in [0, 1), got 1"},
      {"beta2: -0.5", "key 'optimizer.beta2': expected a number in [0, 1), got -0.5"},
      {"epsilon: 0", "key 'optimizer.epsilon': expected a number in (0, 1], got 0"},
      {"learning_rate: -0.001",
       "key 'optimizer.learning_rate': expected a number in (0, 100], got -0.001"},
      {"learning_rate: 1e308",
       "key 'optimizer.learning_rate': expected a number in (0, 100], got 1e+308"},
      {"weight_decay: -0.01",
       "key 'optimizer.weight_decay': expected a number in [0, 1], got -0.01"},
      {"max_grad_norm: -1",
       "key 'optimizer.max_grad_norm': expected a number in [0, 1e+06], got -1"},
      {"loss_scale: 0", "key 'optimizer.loss_scale': expected a number in (0, 4.29497e+09], got 0"},
      {"schedule: steps, step_list: [[0, -1]]",
       "key 'optimizer.step_list': expected a number in [0, 100], got -1"},
  };
  for (const auto& [given, message] : cases) {
    const auto file =
        dir.write("o.yaml", "backend: cpu\ntask: pretrain\noptimizer: {" + given + "}\n");
    try {
      load_task_config(file);
      ADD_FAILURE() << given << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("o.yaml:3: " + message), std::string::npos)
          << given << ": " << e.what();
    }
  }
  // An STS-B score is a similarity from 0 to 5.
  const auto tsv = dir.write("train.tsv",
                             "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t"
                             "sentence1\tsentence2\tscore\n0\tmain\tx\t2012\t0\tnone\tnone\t"
                             "a man\ta person\t1e308\n");
  const auto vocab = dir.write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nman\nperson\n");
  const auto config = dir.write(
      "g.yaml",
      "backend: cpu\ntask: glue\nmodel: {preset: tiny, "
      "vocab_size: 8}\ndata: {vocab: " +
          vocab.string() + "}\nfinetune: {glue_task: sts-b, train_file: " + tsv.string() + "}\n");
  const auto r = test::run_polyhal("run " + config.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.tsv:2: score 1e308 is outside STS-B's range [0, 5]"),
            std::string::npos)
      << r.output;
}

/// Rewrites checkpoint `file` with `change` applied to its state and metadata.
void tamper(const std::filesystem::path& file,
            const std::function<void(TensorMap&, std::map<std::string, std::string>&)>& change,
            const std::filesystem::path& to = {}) {
  TensorMap state = read_safetensors(file);
  auto metadata = read_safetensors_metadata(file);
  change(state, metadata);
  write_safetensors(state, DType::f32, to.empty() ? file : to, metadata);
}

// Items 6 and 9: checkpoints are never trusted blindly.
TEST(HardeningRound2, CheckpointsWithBadValuesOrStepsAreRefused) {
  test::TempDir dir;
  const auto config = tiny_pretrain(dir, "p.yaml", "steps: 2\ncheckpoint: {dir: ck, every: 2}\n");
  ASSERT_EQ(test::run_polyhal("run --config " + config).exit_code, 0);
  const auto good = dir.path() / "ck" / "checkpoint-00000002.safetensors";
  const auto resume = [&](const std::string& expected) {
    const auto r = test::run_polyhal("run --config " + config + " --set steps=4");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "ck" / "checkpoint-00000004.safetensors"));
  };
  const auto saved = dir.path() / "good.safetensors";
  std::filesystem::copy_file(good, saved);
  std::string weight, second;
  tamper(good, [&](TensorMap& state, auto&) {
    for (auto& [name, tensor] : state) {
      if (weight.empty() && !name.starts_with("optimizer.")) weight = name;
      if (second.empty() && name.starts_with("optimizer.v.")) second = name;
    }
    state.at(weight).values[3] = std::numeric_limits<float>::quiet_NaN();
  });
  resume("checkpoint-00000002.safetensors: tensor '" + weight + "' holds nan at element 3");
  tamper(
      saved, [&](TensorMap& state, auto&) { state.at(second).values[0] = -1.0f; }, good);
  resume("tensor '" + second + "' holds -1 at element 0: a second moment is never negative");
  // A checkpoint renamed to a later step (it would overwrite good ones).
  std::filesystem::copy_file(saved, good, std::filesystem::copy_options::overwrite_existing);
  const auto later = dir.path() / "ck" / "checkpoint-00000009.safetensors";
  std::filesystem::copy_file(saved, later);
  resume("checkpoint-00000009.safetensors: its name says step 9 but its metadata step 2");
  tamper(
      saved, [](TensorMap&, auto& metadata) { metadata["step"] = "9223372036854775807"; }, later);
  resume("checkpoint step 9223372036854775807 is beyond any run");
}

// Item 6: a run whose loss stops being finite ends (exit 1) without
// checkpointing the diverged state. Weights of 1e30 overflow the first
// forward pass.
TEST(HardeningRound2, ADivergedRunStopsWithoutCheckpointingIt) {
  test::TempDir dir;
  const auto first = tiny_pretrain(dir, "a.yaml", "steps: 1\ncheckpoint: {dir: a}\n");
  ASSERT_EQ(test::run_polyhal("run --config " + first).exit_code, 0);
  const auto huge = dir.path() / "huge.safetensors";
  tamper(
      dir.path() / "a" / "hf" / "model.safetensors",
      [](TensorMap& weights, auto&) {
        for (auto& [name, tensor] : weights)
          for (float& x : tensor.values) x = 1e30f;
      },
      huge);
  const auto config = tiny_pretrain(dir, "p.yaml", "steps: 40\ncheckpoint: {dir: ck, every: 1}\n");
  const auto r =
      test::run_polyhal("run --config " + config + " --set model.weights=" + huge.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the loss has not been finite for 5 steps in a row (steps 1 to 5): the "
                          "run diverged"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "ck" / "checkpoint-00000001.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "ck" / "hf"));
}

// Item 8: a checkpoint.dir that cannot be listed stops the run instead of
// starting it over.
TEST(HardeningRound2, ACheckpointDirThatCannotBeListedStopsTheRun) {
  test::TempDir dir;
  std::filesystem::create_directory_symlink("loop", dir.path() / "loop");
  const auto config = tiny_pretrain(dir, "p.yaml", "steps: 1\ncheckpoint: {dir: loop}\n");
  const auto r = test::run_polyhal("run --config " + config);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("loop"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("symbolic links"), std::string::npos) << r.output;
}

// Item 7: two runs on one checkpoint.dir: the second is refused, naming the
// first (pid and host), and the first's checkpoints are untouched.
TEST(HardeningRound2, ASecondRunOnOneCheckpointDirIsRefusedNamingTheFirst) {
  test::TempDir dir;
  const auto config =
      tiny_pretrain(dir, "p.yaml", "steps: 1000000\ncheckpoint: {dir: ck, every: 1000}\n");
  const auto lock = (dir.path() / "ck" / ".polyhal.lock").string();
  const std::string first = std::string(POLYHAL_LAUNCHER) + " run --config " + config;
  const auto r = test::run_command(
      "cd " + dir.path().string() + " && bash -c '" + first +
      " > first.out 2>&1 & pid=$!; for i in $(seq 300); do grep -q pid " + lock +
      " 2>/dev/null && break; sleep 0.1; done; " + first + " --set steps=5; code=$?; kill $pid; " +
      "wait $pid; echo \"second exit $code first pid $pid\"'");
  EXPECT_NE(r.output.find("second exit 2 first pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is in use by another run (pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("give this run its own checkpoint.dir"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "ck" / "checkpoint-00000005.safetensors"));
}

// Item 15: a log file that cannot be written ends the run with exit 1.
TEST(HardeningRound2, ALogFileThatCannotBeWrittenFailsTheRun) {
  test::TempDir dir;
  const auto config = tiny_pretrain(dir, "p.yaml", "steps: 1\nlog: {file: /dev/full}\n");
  const auto r = test::run_polyhal("run --config " + config);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("log.file /dev/full: writing failed (No space left on device)"),
            std::string::npos)
      << r.output;
}

// Items 14 and 18: a FIFO, a device or a directory where a file is read is
// refused with its own words (exit 2), never read (a FIFO would block).
TEST(HardeningRound2, InputsThatAreNotRegularFilesAreRefused) {
  test::TempDir dir;
  const auto fifo = dir.path() / "fifo";
  ASSERT_EQ(test::run_command("mkfifo " + fifo.string()).exit_code, 0);
  const std::string launcher = "timeout 30 " + std::string(POLYHAL_LAUNCHER);
  const auto refused = [&](const std::string& arguments, const std::string& message) {
    const auto r = test::run_command(launcher + " " + arguments);
    EXPECT_EQ(r.exit_code, 2) << arguments << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << arguments << ": " << r.output;
  };
  const std::string fifo_message = fifo.string() + ": a FIFO, not a regular file";
  refused("validate " + fifo.string(), fifo_message);
  refused("validate " + dir.path().string(), dir.path().string() + ": a directory, not a file");
  const auto config = tiny_pretrain(dir, "p.yaml", "steps: 1\n");
  refused("run --config " + config + " --set model.weights=" + fifo.string(), fifo_message);
  refused("run --config " + config + " --set model.hf_config=" + fifo.string(), fifo_message);
  refused("run --config " + config + " --set checkpoint.init=" + fifo.string(), fifo_message);
  refused("run --config " + config + " --set checkpoint.init=/dev/zero",
          "/dev/zero: a device, not a regular file");
  refused("run " + dir.write("t.yaml",
                             "backend: cpu\ntask: inference\nmodel: {preset: tiny}\n"
                             "data: {source: text, text_file: " +
                                 dir.write("x.txt", "hello\n").string() + ", vocab: /dev/zero}\n")
                       .string(),
          "/dev/zero: a device, not a regular file");
  // A FIFO named as a checkpoint in checkpoint.dir.
  std::filesystem::create_directory(dir.path() / "ck");
  ASSERT_EQ(test::run_command("mkfifo " +
                              (dir.path() / "ck" / "checkpoint-00000001.safetensors").string())
                .exit_code,
            0);
  refused("run --config " + config + " --set checkpoint.dir=ck", "a FIFO, not a regular file");
}

// Item 16: the temporary files of killed checkpoint writes are removed at
// the next start (under the directory's lock); nothing else is.
TEST(HardeningRound2, TemporariesOfKilledCheckpointWritesAreRemoved) {
  test::TempDir dir;
  const auto ck = dir.path() / "ck";
  std::filesystem::create_directory(ck);
  const auto stale = dir.write("ck/checkpoint-00000001.safetensors.tmp.Ab12Cd", "partial");
  const auto other = dir.write("ck/notes.tmp.Ab12Cd", "the user's");
  const auto config = tiny_pretrain(dir, "p.yaml", "steps: 1\ncheckpoint: {dir: ck}\n");
  const auto r = test::run_polyhal("run --config " + config);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_NE(r.output.find("the temporary file of a checkpoint write that was killed"),
            std::string::npos)
      << r.output;
}

// Item 17: a set of part files cut short is not taken for the whole set.
TEST(HardeningRound2, AnIncompleteSetOfPartFilesIsRefused) {
  test::TempDir dir;
  std::filesystem::create_directory(dir.path() / "data");
  dir.write("data/part-00000-of-00064.hdf5", "");
  dir.write("data/part-00001-of-00064.hdf5", "");
  const auto config = tiny_pretrain(dir, "p.yaml", "steps: 1\n");
  const auto r = test::run_polyhal("validate --config " + config +
                                   " --set data.source=mlperf_hdf5 --set data.files=data");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data: 2 of 64 part files: the set is incomplete (missing part 2, 3, 4, "
                          "5, 6, ...)"),
            std::string::npos)
      << r.output;
}

// Item 13: a plugin that calls exit(0) while opening devices does not make
// the run exit 0 without a word: exit 1, naming the plugin's file.
TEST(HardeningRound2, APluginThatExitsIsReportedNotObeyed) {
  test::TempDir dir;
  const auto plugin = dir.path() / "libpolyhal_plugin_exitopen.so";
  std::filesystem::copy_file(std::filesystem::path(POLYHAL_FIXTURE_DIR) / plugin.filename(),
                             plugin);
  const auto config =
      dir.write("x.yaml", "backend: exitopen\nplugin_paths: [" + dir.path().string() +
                              "]\ntask: matmul-bench\n"
                              "matmul_bench: {shapes: [[8, 8, 8]]}\n");
  const auto r = test::run_polyhal("run --config " + config.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("backend 'exitopen': opening devices: the plugin " + plugin.string() +
                          " ended the process itself"),
            std::string::npos)
      << r.output;
}

// Item 11: inputs held in memory have a size cap, checked before reading
// (sparse files: nothing is written to disk).
TEST(HardeningRound2, OversizedInputsAreRefusedBeforeTheyAreRead) {
  test::TempDir dir;
  const auto sparse = [&](const std::string& name, const std::string& size) {
    const auto file = dir.path() / name;
    EXPECT_EQ(test::run_command("truncate -s " + size + " " + file.string()).exit_code, 0);
    return file.string();
  };
  const auto vocab = sparse("vocab.txt", "65M");
  const auto text = dir.write("x.txt", "hello\n").string();
  const auto r =
      test::run_polyhal("run " + dir.write("t.yaml",
                                           "backend: cpu\ntask: inference\nmodel: {preset: tiny}\n"
                                           "data: {source: text, text_file: " +
                                               text + ", vocab: " + vocab + "}\n")
                                     .string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(vocab + ": 68157440 bytes, more than the 67108864 a vocabulary may have"),
            std::string::npos)
      << r.output;
  const auto squad = sparse("train.json", "129M");
  const auto tokens = dir.write("vocab2.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
  const auto s = test::run_polyhal(
      "run " + dir.write("s.yaml",
                         "backend: cpu\ntask: squad\nmodel: {preset: tiny, vocab_size: "
                         "5}\ndata: {vocab: " +
                             tokens.string() + "}\nfinetune: {train_file: " + squad + "}\n")
                   .string());
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_NE(s.output.find("more than the 134217728 a SQuAD file may have"), std::string::npos)
      << s.output;
}

// Item 12: work is bounded by what the input really holds.
TEST(HardeningRound2, WorkIsBoundedByWhatTheInputHolds) {
  // A file of 3 KB claiming 2^40 rows (unwritten chunks, or unallocated
  // contiguous storage) is refused before any row is read.
  const auto bad = std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/mlperf/claims";
  for (const char* name : {"claims_rows_chunked.hdf5", "claims_rows_contiguous.hdf5"}) {
    try {
      MlperfHdf5Reader reader(bad / name);
      ADD_FAILURE() << name << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("claims 1099511627776 rows but"), std::string::npos)
          << e.what();
    }
  }
  // nnlshp over lengths up to 65536 (it listed every fill: bad_alloc) or
  // 1024 (138 s for 8 sequences): the fills of the lengths the data has.
  for (const std::int64_t max_len : {std::int64_t{1024}, std::int64_t{65536}}) {
    const std::vector<std::int64_t> lengths{100, 200, 300, 424, 512, 900, 124, 1000};
    PackingStats stats;
    const auto packs = pack_sequences(lengths, max_len, 3, "nnlshp", &stats);
    std::int64_t placed = 0;
    for (const auto& pack : packs) placed += static_cast<std::int64_t>(pack.size());
    EXPECT_EQ(placed, 8) << max_len;
  }
}

// Item 12: prepare-data is linear in a line's length (a 4 MB line took 17 s,
// a 64 MB one did not end in 300 s: quadratic truncation of a long segment).
TEST(HardeningRound2, PrepareDataIsLinearInALinesLength) {
  test::TempDir dir;
  const auto corpus = std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/corpus";
  std::filesystem::create_directory(dir.path() / "text");
  ASSERT_EQ(
      test::run_command("python3 -c \"import sys; sys.stdout.write(('the cat sat on the mat "
                        "' * 700000) + chr(10) + chr(10) + 'a second document' + chr(10))\" > " +
                        (dir.path() / "text" / "long.txt").string())
          .exit_code,
      0);
  // 16 MB in one line: quadratic, this took minutes; linear, seconds.
  const auto r = test::run_command("timeout 120 " + std::string(POLYHAL_LAUNCHER) +
                                   " prepare-data --input " + (dir.path() / "text").string() +
                                   " --vocab " + (corpus / "vocab.txt").string() + " --output " +
                                   (dir.path() / "data").string() + " --dupe-factor 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace polyhal
