// `polyhal pack` and the packed reader: every MLPerf sample comes back once,
// whole, from the packed rows; bad input names file, sample and field.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "polyhal/app/mlperf_hdf5.hpp"
#include "polyhal/app/packed_data.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kMlperf =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/mlperf";
const std::filesystem::path kPacked =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/packed";

using test::expect_config_error;

TEST(PackedData, EverySampleComesBackOnceAndWhole) {
  for (const std::string algorithm : {"spfhp", "nnlshp"}) {
    test::TempDir dir;
    PackOptions options;
    options.input = kMlperf;
    options.output = dir.path() / "packed";
    options.max_seq_len = 32;
    options.algorithm = algorithm;
    options.rows_per_file = 3;  // 4 packs: two files
    const PackResult result = pack_mlperf_hdf5(options);
    EXPECT_EQ(result.stats.sequences, 8);
    EXPECT_EQ(result.stats.packs, 4);  // lengths 10-15: two per row of 32
    EXPECT_DOUBLE_EQ(result.stats.speedup(), 2.0);
    ASSERT_EQ(result.files.size(), 2u);
    EXPECT_EQ(result.files[0].filename(), "part-00000-of-00002.hdf5");
    for (const auto& entry : std::filesystem::directory_iterator(options.output))
      EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos)
          << "a temporary file was left: " << entry.path();
    ASSERT_TRUE(is_packed_data(options.output));
    EXPECT_FALSE(is_packed_data(kMlperf));

    const MlperfHdf5Reader original(kMlperf);
    std::map<std::vector<std::int32_t>, std::int64_t> by_tokens;  // unpadded ids -> sample
    for (std::int64_t i = 0; i < original.size(); ++i) {
      const auto s = original.sample(i);
      std::vector<std::int32_t> tokens;
      for (std::size_t t = 0; t < s.input_ids.size(); ++t)
        if (s.input_mask[t] == 1) tokens.push_back(s.input_ids[t]);
      by_tokens[tokens] = i;
    }
    ASSERT_EQ(by_tokens.size(), 8u);
    const PackedHdf5Reader packed(options.output);
    ASSERT_EQ(packed.size(), 4);
    EXPECT_EQ(packed.seq_len(), 32);
    EXPECT_EQ(packed.max_sequences(), 3);
    std::vector<int> found(8, 0);
    for (std::int64_t r = 0; r < packed.size(); ++r) {
      const PackedSample row = packed.sample(r);
      for (std::int64_t q = 1; q <= row.sequences(); ++q) {
        std::vector<std::int32_t> tokens, segments;
        std::int64_t start = -1;
        for (std::size_t t = 0; t < row.input_mask.size(); ++t) {
          if (row.input_mask[t] != q) continue;
          if (start < 0) start = static_cast<std::int64_t>(t);
          tokens.push_back(row.input_ids[t]);
          segments.push_back(row.segment_ids[t]);
        }
        ASSERT_TRUE(by_tokens.count(tokens)) << "row " << r << " sequence " << q;
        const std::int64_t index = by_tokens[tokens];
        ++found[static_cast<std::size_t>(index)];
        const auto s = original.sample(index);
        for (std::size_t t = 0; t < segments.size(); ++t) EXPECT_EQ(segments[t], s.segment_ids[t]);
        EXPECT_EQ(row.next_sentence_positions[static_cast<std::size_t>(q - 1)], start);
        EXPECT_EQ(row.next_sentence_labels[static_cast<std::size_t>(q - 1)], s.next_sentence_label);
        // The sample's masked positions, moved by the sequence's start.
        std::vector<std::pair<std::int32_t, std::int32_t>> want, got;
        for (std::size_t k = 0; k < s.masked_lm_positions.size(); ++k)
          if (s.masked_lm_positions[k] != 0)
            want.emplace_back(s.masked_lm_positions[k] + static_cast<std::int32_t>(start),
                              s.masked_lm_ids[k]);
        for (std::size_t k = 0; k < row.masked_lm_positions.size(); ++k) {
          const std::int32_t at = row.masked_lm_positions[k];
          if (row.masked_lm_weights[k] == 1.0f && row.input_mask[static_cast<std::size_t>(at)] == q)
            got.emplace_back(at, row.masked_lm_ids[k]);
        }
        EXPECT_EQ(got, want) << "row " << r << " sequence " << q;
      }
    }
    for (std::size_t i = 0; i < found.size(); ++i) EXPECT_EQ(found[i], 1) << "sample " << i;
  }
}

TEST(PackedData, BadInputNamesFileSampleAndField) {
  test::TempDir dir;
  PackOptions options;
  options.input = kMlperf;
  options.output = dir.path() / "out";
  options.max_seq_len = 8;
  expect_config_error(
      [&] { pack_mlperf_hdf5(options); },
      "part-00000-of-00002.hdf5: sample 0: field input_mask: 10 tokens, longer than "
      "the pack length 8");
  EXPECT_FALSE(std::filesystem::exists(options.output / "part-00000-of-00001.hdf5"));
  options.max_seq_len = 32;
  std::filesystem::create_directories(options.output);
  dir.write("out/other.hdf5", "x");
  expect_config_error([&] { pack_mlperf_hdf5(options); }, "--output already holds other.hdf5");

  EXPECT_EQ(PackedHdf5Reader(kPacked / "good.hdf5").sample(0).sequences(), 2);
  expect_config_error([] { PackedHdf5Reader(kPacked / "bad/positions.hdf5").sample(0); },
                      "positions.hdf5: sample 0: field packed_position_ids: 4 at token 6, but "
                      "packed_input_mask puts that token at position 1 of sequence 2");
  expect_config_error([] { PackedHdf5Reader(kPacked / "bad/mask.hdf5").sample(0); },
                      "mask.hdf5: sample 0: field packed_input_mask: sequence 1 at token 7 after "
                      "sequence 2");
  expect_config_error([] { PackedHdf5Reader(kPacked / "bad/lm_position.hdf5").sample(0); },
                      "field packed_masked_lm_positions: 10 at 1: not a token of any sequence");
  expect_config_error([] { PackedHdf5Reader(kPacked / "bad/ns_weights.hdf5").sample(0); },
                      "field packed_next_sentence_weights: the row holds 2 sequences; weight 1 for "
                      "sequence 3");
  expect_config_error([] { PackedHdf5Reader r(kMlperf); }, "no dataset 'packed_input_ids'");
  // Packed files where a task reads unpacked ones: packing them again, or
  // the inference task (which must not fall back to generated data).
  options.input = kPacked / "good.hdf5";
  options.output = dir.path() / "again";
  expect_config_error([&] { pack_mlperf_hdf5(options); },
                      "good.hdf5: --input holds packed rows already");
  const auto config =
      dir.write("inference.yaml",
                "backend: cpu\ntask: inference\nmodel: {preset: tiny, seq_len: 32}\n"
                "data: {source: mlperf_hdf5, files: " +
                    (kPacked / "good.hdf5").string() + "}\n");
  const auto r = test::run_polyhal("run --config " + config.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("inference.yaml:4: key 'data.source': task inference reads generated, "
                          "pattern or text data, not mlperf_hdf5"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("good.hdf5, packed rows)"), std::string::npos) << r.output;
}

// The command prints what packing achieved.
TEST(PackedData, PackCommandReportsEfficiencyAndSpeedup) {
  test::TempDir dir;
  const auto r = test::run_polyhal("pack --input " + kMlperf.string() + " --output " +
                                   (dir.path() / "p").string() + " --max-seq-len 32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("packed 8 sequences into 4 packs of 32 tokens (spfhp, at most 3 per "
                          "pack)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("efficiency: 75.0% of tokens are real (unpacked: 37.5%)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("theoretical speed-up: 2.000x"), std::string::npos) << r.output;
  const auto bad = test::run_polyhal("pack --input " + kMlperf.string() + " --output " +
                                     (dir.path() / "q").string() + " --algorithm best");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("algorithm must be spfhp or nnlshp"), std::string::npos);
  EXPECT_EQ(test::run_polyhal("pack --input x").exit_code, 2);
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

/// The test data packed 2 per row of 32 into dir/packed, and a tiny
/// pre-training config reading it with `rest` (batch, optimizer, steps, ...).
std::filesystem::path packed_pretrain_config(const test::TempDir& dir, const std::string& rest) {
  const auto r = test::run_polyhal("pack --input " + kMlperf.string() + " --output " +
                                   (dir.path() / "packed").string() + " --max-seq-len 32");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir.write("p.yaml",
                   "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, vocab_size: "
                   "64}\ndata: {source: mlperf_hdf5, files: packed}\n" +
                       rest);
}

// `pretrain` reads packed files as it finds them: each step trains on the
// sequences its rows hold, and says so; a config that says otherwise, or
// pipelines packed rows, is refused naming the key.
TEST(PackedData, PretrainDetectsPackedFilesAndCountsSequences) {
  test::TempDir dir;
  const auto config = packed_pretrain_config(
      dir,
      "batch: {micro: 2}\noptimizer: {name: adamw, learning_rate: 0.001}\nsteps: 2\n"
      "checkpoint: {dir: ckpt, every: 1}\n");
  const auto metrics = dir.path() / "m.jsonl";
  auto r =
      test::run_polyhal("run --config " + config.string() + " --metrics-out " + metrics.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("packed MLPerf HDF5: 4 rows of 32 tokens (up to 3 sequences"),
            std::string::npos)
      << r.output;
  const auto summary = test::last_json_line(metrics);
  EXPECT_EQ(summary["sequences_trained"], 8) << "2 steps of 2 rows of 2 sequences";
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "ckpt/checkpoint-00000002.safetensors"));
  r = test::run_polyhal("validate --config " + config.string() + " --set data.packed=false");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'data.packed': false, but"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("holds packed rows"), std::string::npos) << r.output;
  // A device model counts sequences: a packed row costs about what an
  // unpacked one does and holds 2 here.
  const auto estimate = [&](const std::string& sets) {
    const auto m = dir.path() / "e.jsonl";
    const auto e = test::run_polyhal("run --compile-only --config " + config.string() +
                                     " --backend gaudi --set model.precision=bf16 --metrics-out " +
                                     m.string() + " " + sets);
    EXPECT_EQ(e.exit_code, 0) << e.output;
    return test::last_json_line(m)["estimated_sequences_per_second"].get<double>();
  };
  const double packed = estimate(""),
               unpacked = estimate("--set data.source=generated --set data.files=null");
  EXPECT_NEAR(packed / unpacked, 2.0, 0.1) << packed << " vs " << unpacked;
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

// Packed rows go through the ordinary loop: accumulation, 2 replicas in one
// process, 2 MPI ranks or 2 pipeline stages (the same losses), and a resume
// that repeats the last step exactly.
TEST(PackedData, PackedRowsTrainWithReplicasMpiAndResume) {
  test::TempDir dir;
  const auto config = packed_pretrain_config(
      dir,
      "batch: {micro: 1, grad_accum: 2, replicas: 2}\n"
      "optimizer: {name: lamb, learning_rate: 0.005}\nsteps: 3\nlog: {every: 1}\n");
  const auto losses = [&](const std::string& name, const std::string& command,
                          const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_command(command + " run --config " + config.string() +
                                     " --metrics-out " + metrics.string() + " " + sets + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<double> out;
    for (const auto& record : test::step_records(metrics)) {
      out.push_back(record["loss"].get<double>());
      EXPECT_EQ(record["sequences"], 8) << "2 replicas x 2 micro-batches x 1 row of 2";
    }
    return out;
  };
  const auto local =
      losses("local", POLYHAL_LAUNCHER, "--set checkpoint.dir=ckpt --set checkpoint.every=1");
  const auto mpi = losses("mpi", test::mpirun(2),
                          "--set collective.engine=mpi --set collective.timeout_seconds=120");
  ASSERT_EQ(local.size(), 3u);
  const auto piped = losses("piped", POLYHAL_LAUNCHER, "--set model.pipeline=2");
  ASSERT_EQ(mpi.size(), local.size());
  ASSERT_EQ(piped.size(), local.size());
  for (std::size_t i = 0; i < local.size(); ++i) {
    EXPECT_NEAR(mpi[i], local[i], 1e-5) << i;
    EXPECT_NEAR(piped[i], local[i], 1e-5) << i;
  }
  std::filesystem::remove(dir.path() / "ckpt/checkpoint-00000003.safetensors");
  const auto resumed =
      losses("resumed", POLYHAL_LAUNCHER, "--set checkpoint.dir=ckpt --set checkpoint.every=1");
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0], local[2]);
}

}  // namespace
}  // namespace polyhal
