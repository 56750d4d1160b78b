// Replicas across processes: `mpirun -np 2 polyhal run` with collective: mpi,
// on this machine (as root in CI: Open MPI's allow-run-as-root variables).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "polyhal/app/safetensors.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

using test::mpirun;

std::string config(const test::TempDir& dir, const std::string& name, const std::string& extra) {
  return dir
      .write(name,
             "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, precision: f32, "
             "vocab_size: 64, dropout: 0.1}\nbatch: {micro: 16, grad_accum: 1}\n"
             "data: {source: pattern, seed: 3, max_predictions: 3}\n"
             "optimizer: {name: lamb, learning_rate: 0.005}\nlog: {every: 1}\n" +
                 extra)
      .string();
}

std::size_t count_lines_with(const std::filesystem::path& file, const std::string& text) {
  std::ifstream in(file);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(text) != std::string::npos;
  return n;
}

TEST(Mpi, EveryCollectiveOnThreeRanks) {
  const auto r = test::run_command(mpirun(3, POLYHAL_MPI_CHECK) + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok: 3 ranks"), std::string::npos) << r.output;
}

TEST(Mpi, TwoRanksTrainLikeTwoReplicasInOneProcess) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  auto mpi = test::run_command(mpirun(2) + " run --config " +
                               config(dir, "mpi.yaml",
                                      "steps: 6\ncollective: {engine: mpi, timeout_seconds: 60}\n"
                                      "checkpoint: {dir: mpi, every: 3}\n") +
                               " --metrics-out " + metrics.string() + " 2>&1");
  ASSERT_EQ(mpi.exit_code, 0) << mpi.output;
  EXPECT_NE(mpi.output.find("replicas 2 = global batch 32"), std::string::npos) << mpi.output;
  // Rank 0 alone reports and writes: one line per step, one set of checkpoints.
  EXPECT_EQ(count_lines_with(metrics, "\"event\":\"step\""), 6u);
  EXPECT_EQ(count_lines_with(metrics, "\"collective\":\"mpi\""), 1u);
  auto local = test::run_polyhal("run --config " +
                                 config(dir, "local.yaml", "steps: 6\ncheckpoint: {dir: local}\n") +
                                 " --set batch.replicas=2");
  ASSERT_EQ(local.exit_code, 0) << local.output;
  const auto a = read_safetensors(dir.path() / "mpi" / "checkpoint-00000006.safetensors");
  const auto b = read_safetensors(dir.path() / "local" / "checkpoint-00000006.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : b) {
    const auto& other = a.at(name).values;
    for (std::size_t i = 0; i < tensor.values.size(); ++i)
      ASSERT_NEAR(other[i], tensor.values[i], 1e-5 + 1e-4 * std::fabs(tensor.values[i])) << name;
  }
}

// Issue 34, item 3: gradients reduced in buckets during backward (the
// default) give bit for bit the weights and optimizer state of reducing
// after backward, across MPI ranks and across replica threads.
TEST(Mpi, OverlappedAllReduceGivesTheSameStateBitForBit) {
  test::TempDir dir;
  const std::string common = "steps: 4\ncollective: {timeout_seconds: 60, bucket_mb: 1}\n";
  const auto cfg = config(dir, "o.yaml", common);
  const auto checkpoint = [&](const std::string& name) {
    return read_safetensors(dir.path() / name / "checkpoint-00000004.safetensors");
  };
  for (const char* overlap : {"true", "false"}) {
    const auto mpi = test::run_command(
        mpirun(2) + " run --config " + cfg +
        " --set collective.engine=mpi --set batch.grad_accum=2 --set collective.overlap=" +
        overlap + " --set checkpoint.dir=" +
        (dir.path() / (std::string("mpi-") + overlap)).string() + " 2>&1");
    ASSERT_EQ(mpi.exit_code, 0) << mpi.output;
    const auto local = test::run_polyhal(
        "run --config " + cfg +
        " --set batch.replicas=2 --set batch.grad_accum=2 --set collective.overlap=" + overlap +
        " --set checkpoint.dir=" + (dir.path() / (std::string("local-") + overlap)).string());
    ASSERT_EQ(local.exit_code, 0) << local.output;
  }
  for (const char* engine : {"mpi", "local"}) {
    const auto overlapped = checkpoint(std::string(engine) + "-true");
    const auto after = checkpoint(std::string(engine) + "-false");
    ASSERT_EQ(overlapped.size(), after.size());
    for (const auto& [name, tensor] : after)
      ASSERT_EQ(overlapped.at(name).values, tensor.values) << engine << ": " << name;
  }
}

/// Starts a long MPI run, waits for rank 1, sends it `signal`, and returns
/// mpirun's result and how long the job took to end after the signal.
std::pair<test::CommandResult, double> signal_rank_one(const test::TempDir& dir,
                                                       const std::string& signal) {
  const auto cfg =
      config(dir, "long.yaml", "steps: 1000000\ncollective: {engine: mpi, timeout_seconds: 3}\n");
  const auto out = (dir.path() / "out.txt").string();
  const std::string script = "( " + mpirun(2) + " run --config " + cfg + " > " + out +
                             " 2>&1; echo \"mpirun exit $?\" >> " + out + " )";
  const auto start_file = dir.path() / "signalled";
  // Find rank 1 by its environment, signal it once it is training, then wait for mpirun.
  const std::string driver =
      "bash -c '" + script + " & for i in $(seq 300); do for p in $(pgrep -f " + cfg +
      "); do if tr \"\\0\" \"\\n\" < /proc/$p/environ 2>/dev/null | grep -qx "
      "OMPI_COMM_WORLD_RANK=1; then grep -q \"step 2/\" " +
      (dir.path() / "out.txt").string() + " 2>/dev/null && { kill -" + signal +
      " $p; date +%s.%N > " + start_file.string() +
      "; break 2; }; fi; done; sleep 0.1; done; wait; cat " + (dir.path() / "out.txt").string() +
      "'";
  const auto begin = std::chrono::steady_clock::now();
  auto result = test::run_command(driver);
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return {result, total};
}

TEST(Mpi, AStoppedRankMakesTheOthersExitWithinTheTimeout) {
  test::TempDir dir;
  const auto [result, seconds] = signal_rank_one(dir, "STOP");
  ASSERT_TRUE(std::filesystem::exists(dir.path() / "signalled")) << result.output;
  EXPECT_NE(result.output.find("did not complete within 3.0 s"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("rank 0 of 2"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("mpirun exit 4"), std::string::npos)
      << "exit code 4: a replica was lost\n"
      << result.output;
  EXPECT_LT(seconds, 60.0) << result.output;
}

/// A rank killed outright never runs polyhal's code again, so no rank can
/// report 4 for it: mpirun sees the death first, stops the other ranks and
/// exits with the killed rank's status, 128 + 9 (docs/scale-out.md).
TEST(Mpi, AKilledRankEndsTheJobWithMpirunsStatusOfTheKilledRank) {
  test::TempDir dir;
  const auto [result, seconds] = signal_rank_one(dir, "KILL");
  ASSERT_TRUE(std::filesystem::exists(dir.path() / "signalled")) << result.output;
  EXPECT_NE(result.output.find("signal 9"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("mpirun exit 137"), std::string::npos) << result.output;
  EXPECT_LT(seconds, 60.0) << result.output;
}

/// `mpirun` with rank 0 running `first` and rank 1 `second` (each a config):
/// one program that picks its config by rank, since Open MPI 5.0.7's mpirun
/// (Debian 13) crashes on an MPMD command line ("A : B") or an app file.
std::string two_configs(const std::string& first, const std::string& second) {
  // Where the configs are, as run_command does for a command naming one.
  const std::string where = std::filesystem::path(first).parent_path().string();
  return "cd '" + where + "' && " +
         mpirun(2, "sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 0 ]; then config=" + first +
                       "; else config=" + second + "; fi; exec " + POLYHAL_LAUNCHER +
                       " run --config \"$config\"'");
}

// Issue 27, item 3: ranks that would diverge are refused before the first
// step, naming the rank and what differs; the process exits 2 (bad input).
TEST(Mpi, RanksWithDifferentConfigsAreRefusedNamingTheKeys) {
  test::TempDir dir;
  const std::string mpi = "steps: 2\ncollective: {engine: mpi, timeout_seconds: 60}\n";
  const auto a = config(dir, "a.yaml", mpi);
  const auto b = dir.write("b.yaml",
                           "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, "
                           "precision: f32, vocab_size: 64, dropout: 0.1}\nbatch: {micro: 16, "
                           "grad_accum: 1}\ndata: {source: pattern, seed: 3, max_predictions: 3}\n"
                           "optimizer: {name: lamb, learning_rate: 0.001}\nlog: {every: 1}\n" +
                               mpi)
                     .string();
  const auto r = test::run_command(two_configs(a, b));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("rank 1's config differs from rank 0's in optimizer.learning_rate "
                          "(rank 0: 0.005, rank 1: 0.001) (config hash "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("every rank of an MPI job must run the same config"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << "no step may run: " << r.output;
  // Another model (it aborted inside MPI with 134).
  const auto preset = dir.write("c.yaml", std::string("backend: cpu\ntask: pretrain\n") +
                                              "model: {preset: mini, seq_len: 32, precision: f32, "
                                              "vocab_size: 64, dropout: 0.1}\nbatch: {micro: 16, "
                                              "grad_accum: 1}\ndata: {source: pattern, seed: 3, "
                                              "max_predictions: 3}\noptimizer: {name: lamb, "
                                              "learning_rate: 0.005}\nlog: {every: 1}\n" +
                                              mpi)
                          .string();
  const auto p = test::run_command(two_configs(a, preset));
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_NE(p.output.find("rank 1's config differs from rank 0's in model.preset"),
            std::string::npos)
      << p.output;
}

// Per-node checkpoint directories (allowed, docs/scale-out.md): only rank 0
// writes, so on a rerun rank 0 would resume and rank 1 start afresh. They
// must agree before any state is loaded, and nothing is written.
TEST(Mpi, RanksThatWouldResumeFromDifferentPlacesAreRefused) {
  test::TempDir dir;
  const std::string mpi = "collective: {engine: mpi, timeout_seconds: 60}\n";
  const auto a = config(dir, "a.yaml", mpi + "steps: 3\ncheckpoint: {dir: node0, every: 3}\n");
  const auto b = config(dir, "b.yaml", mpi + "steps: 3\ncheckpoint: {dir: node1, every: 3}\n");
  const auto first = test::run_command(two_configs(a, b));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_TRUE(std::filesystem::exists(dir.path() / "node0" / "checkpoint-00000003.safetensors"));
  const auto exported =
      std::filesystem::last_write_time(dir.path() / "node0" / "hf" / "model.safetensors");
  const auto again = test::run_command(
      two_configs(config(dir, "a6.yaml", mpi + "steps: 6\ncheckpoint: {dir: node0, every: 3}\n"),
                  config(dir, "b6.yaml", mpi + "steps: 6\ncheckpoint: {dir: node1, every: 3}\n")));
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("ranks start from different places: rank 0 from the checkpoint of "
                              "step 3, rank 1 from the start weights (no checkpoint found)"),
            std::string::npos)
      << again.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "node0" / "checkpoint-00000006.safetensors"));
  EXPECT_EQ(std::filesystem::last_write_time(dir.path() / "node0" / "hf" / "model.safetensors"),
            exported);
}

// Issue 53 item 7: ranks that start from different weights at the same
// path (node-local copies of checkpoint.init), or build different models
// (a node-local model.hf_config that differs), were not detected: the
// replicas never agreed, or the all-reduce met gradients of two sizes. Each
// rank here has its own mount namespace in which DIR/node is its node's
// directory, as the same path on two hosts.
TEST(Mpi, RanksWithDifferentStartWeightsOrModelsAreRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "node-local directories need mount namespaces (root)";
  // In a chroot (the Debian 13 root) unshare cannot make / private.
  if (test::run_command("unshare --mount true").exit_code != 0)
    GTEST_SKIP() << "no private mount namespace here (unshare --mount fails)";
  test::TempDir dir;
  for (const char* rank : {"0", "1"}) {
    const auto made = test::run_polyhal(
        "run --config " +
        dir.write("init.yaml",
                  "backend: cpu\ntask: inference\nmodel: {preset: tiny, seq_len: 32, vocab_size: "
                  "64, head: pretraining}\nbatch: {micro: 1}\ndata: {source: generated}\n"
                  "inference: {iterations: 1, warmup: 0}\n")
            .string() +
        " --set model.seed=" + rank +
        " --set model.save=" + (dir.path() / ("node" + std::string(rank)) / "init").string());
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  nlohmann::json one = nlohmann::json::parse(std::ifstream(dir.path() / "node1/init/config.json"));
  one["num_hidden_layers"] = 1;
  std::ofstream(dir.path() / "node1" / "one.json") << one.dump();
  std::filesystem::copy_file(dir.path() / "node0/init/config.json", dir.path() / "node0/one.json");
  std::filesystem::create_directory(dir.path() / "node");
  const auto node_local = [&](const std::string& config) {
    const auto rank = dir.write(
        "rank.sh", "exec unshare --mount sh -c \"mount --bind '" + dir.path().string() +
                       "/node'$OMPI_COMM_WORLD_RANK '" + dir.path().string() + "/node' && exec '" +
                       POLYHAL_LAUNCHER + "' run --config '" + config + "'\"\n");
    return test::run_command(mpirun(2, "sh " + rank.string()) + " 2>&1");
  };
  const std::string mpi = "collective: {engine: mpi, timeout_seconds: 60}\nsteps: 2\n";
  const auto weights = node_local(config(
      dir, "a.yaml", mpi + "checkpoint: {init: " + (dir.path() / "node/init").string() + "}\n"));
  EXPECT_EQ(weights.exit_code, 2) << weights.output;
  EXPECT_NE(weights.output.find("ranks start from different weights: rank 1's the start weights "
                                "(no checkpoint found) hold other values than rank 0's"),
            std::string::npos)
      << weights.output;
  const auto models =
      node_local(dir.write("b.yaml", "backend: cpu\ntask: pretrain\nmodel: {hf_config: " +
                                         (dir.path() / "node/one.json").string() +
                                         ", seq_len: 32, precision: f32}\nbatch: {micro: 16}\n"
                                         "data: {source: pattern, seed: 3, max_predictions: 3}\n" +
                                         mpi)
                     .string());
  EXPECT_EQ(models.exit_code, 2) << models.output;
  EXPECT_NE(models.output.find("ranks build different models: rank 1's the start weights (no "
                               "checkpoint found) hold other tensor names or shapes than rank 0's"),
            std::string::npos)
      << models.output;
}

// Inference instances under mpirun, as Graphcore's benchmark runs them:
// each rank its own model and threads, the job's sequences/s their sum
// (issue 54, item 14); text inference, which writes one output, is refused.
TEST(Mpi, InferenceInstancesSumTheirThroughput) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  const auto config = dir.write(
      "infer.yaml",
      "backend: cpu\ntask: inference\ndevice: {threads: 1}\nmodel: {preset: tiny, seq_len: 32}\n"
      "batch: {micro: 4}\ncollective: mpi\ninference: {iterations: 5, warmup: 1}\n");
  const auto r = test::run_command(test::mpirun(2) + " run --config " + config.string() +
                                   " --metrics-out " + metrics.string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all 2 processes: "), std::string::npos) << r.output;
  std::ifstream in(metrics);
  std::string last;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) last = line;
  const auto summary = nlohmann::json::parse(last);
  EXPECT_EQ(summary["processes"], 2);
  EXPECT_GT(summary["sequences_per_second_all_processes"].get<double>(),
            summary["sequences_per_second"].get<double>());
  const auto text = dir.write("text.yaml",
                              "backend: cpu\ntask: inference\ncollective: mpi\n"
                              "data: {source: text, text_file: x.txt, vocab: v.txt}\n");
  const auto refused = test::run_polyhal("validate --config " + text.string() + " --skip-inputs");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("text inference writes one output"), std::string::npos)
      << refused.output;
}

}  // namespace
}  // namespace polyhal
