// MLPerf BERT HDF5 pre-training data: files written by h5py
// (tests/data/mlperf/make_mlperf_hdf5.py, whose docstring is the formula
// checked here) are read sample by sample and turned into micro-batches;
// bad files and mismatched models are refused with the file named; a run
// trains on them end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "polyhal/app/mlperf_hdf5.hpp"
#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kData = std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/mlperf";
constexpr std::int64_t kSeq = 16, kSamples = 8;

std::int32_t expected_id(std::int64_t g, std::int64_t p) {
  return p < 10 + g % 6 ? static_cast<std::int32_t>(5 + (7 * g + p) % 50) : 0;
}

TEST(MlperfHdf5, ReadsBothPartFilesAsOneSequenceOfSamples) {
  const MlperfHdf5Reader reader(kData);
  ASSERT_EQ(reader.files().size(), 2u);  // the script and its subdirectory are not data
  EXPECT_EQ(reader.size(), kSamples);
  EXPECT_EQ(reader.seq_len(), kSeq);
  EXPECT_EQ(reader.max_predictions(), 4);
  for (std::int64_t g = 0; g < kSamples; ++g) {  // samples 5-7 are the i2, uncompressed file
    const auto s = reader.sample(g);
    const std::int64_t length = 10 + g % 6;
    for (std::int64_t p = 0; p < kSeq; ++p) {
      const auto i = static_cast<std::size_t>(p);
      ASSERT_EQ(s.input_ids[i], expected_id(g, p)) << g << "," << p;
      ASSERT_EQ(s.input_mask[i], p < length ? 1 : 0) << g << "," << p;
      ASSERT_EQ(s.segment_ids[i], p >= length / 2 && p < length ? 1 : 0) << g << "," << p;
    }
    const std::vector<std::int32_t> positions =
        g % 2 == 0 ? std::vector<std::int32_t>{1, 3, 0, 0} : std::vector<std::int32_t>{2, 0, 0, 0};
    EXPECT_EQ(s.masked_lm_positions, positions) << g;
    EXPECT_EQ(s.masked_lm_ids[0], expected_id(g, positions[0]) + 1) << g;
    EXPECT_EQ(s.next_sentence_label, g % 2) << g;
  }
  EXPECT_EQ(reader.sample(6).file.filename(), "part-00001-of-00002.hdf5");
  EXPECT_EQ(reader.sample(6).row, 1);
}

RunConfig mlperf_run(bool shuffle, std::int64_t micro = 3) {
  RunConfig config;
  config.file = "test.yaml";
  config.data.source = "mlperf_hdf5";
  config.data.files = kData;
  config.data.shuffle = shuffle;
  config.data.seed = 11;
  config.batch.micro = micro;
  return config;
}

BertConfig tiny_model() {
  BertConfig model = bert_preset("tiny");
  model.vocab_size = 64;
  return model;
}

TEST(MlperfHdf5, MicroBatchesCarryLabelsOnlyAtTheMaskedPositions) {
  const auto data = open_pretraining_data(data_source(mlperf_run(false)), tiny_model(), {3, kSeq});
  EXPECT_EQ(data->max_predictions(), 4);
  const auto batch = data->batch(1);  // samples 3, 4, 5 in order
  ASSERT_EQ(batch.mlm_labels.size(), static_cast<std::size_t>(3 * kSeq));
  for (std::int64_t b = 0; b < 3; ++b) {
    const std::int64_t g = 3 + b;
    for (std::int64_t p = 0; p < kSeq; ++p) {
      const auto i = static_cast<std::size_t>(b * kSeq + p);
      EXPECT_EQ(batch.inputs.input_ids[i], expected_id(g, p));
      const bool masked = g % 2 == 0 ? (p == 1 || p == 3) : p == 2;
      EXPECT_EQ(batch.mlm_labels[i], masked ? expected_id(g, p) + 1 : -100) << g << "," << p;
    }
    EXPECT_EQ(batch.nsp_labels[static_cast<std::size_t>(b)], g % 2);
  }
  EXPECT_EQ(batch.index, 1u);
}

TEST(MlperfHdf5, ShuffledEpochsVisitEverySampleOnceInAnotherOrder) {
  for (const std::int64_t size : {1, 2, 8, 12, 97}) {
    std::vector<std::int64_t> first, second;
    for (std::uint64_t q = 0; q < static_cast<std::uint64_t>(2 * size); ++q)
      (q < static_cast<std::uint64_t>(size) ? first : second)
          .push_back(sample_at(q, size, 5, true));
    EXPECT_EQ(std::set<std::int64_t>(first.begin(), first.end()).size(),
              static_cast<std::size_t>(size));
    EXPECT_EQ(std::set<std::int64_t>(second.begin(), second.end()).size(),
              static_cast<std::size_t>(size));
    if (size >= 8) {
      EXPECT_NE(first, second) << size;
    }
    EXPECT_EQ(sample_at(3, size, 5, false), 3 % size);
  }
  EXPECT_NE(sample_at(0, 97, 5, true) * 97 + sample_at(1, 97, 5, true),
            sample_at(0, 97, 6, true) * 97 + sample_at(1, 97, 6, true))
      << "another seed, another order";
}

using test::expect_config_error;

TEST(MlperfHdf5, BadFilesAndMismatchedModelsAreRefusedWithTheFileNamed) {
  expect_config_error([] { MlperfHdf5Reader r(kData / "bad/not_hdf5.hdf5"); },
                      "not_hdf5.hdf5: cannot open as HDF5");
  expect_config_error([] { MlperfHdf5Reader r(kData / "bad/no_labels.hdf5"); },
                      "no_labels.hdf5: no dataset 'masked_lm_ids'");
  expect_config_error([] { MlperfHdf5Reader r(kData / "bad/missing.hdf5"); }, "missing.hdf5");
  expect_config_error([] { MlperfHdf5Reader r(kData / "bad"); },
                      "external_link.hdf5: dataset 'input_ids' is an external link: refused");
  // Files that would make the reader open others.
  expect_config_error([] { MlperfHdf5Reader r(kData / "bad/external_storage.hdf5"); },
                      "external_storage.hdf5: dataset 'input_ids' keeps its data outside the file");
  expect_config_error([] { MlperfHdf5Reader r(kData / "bad/virtual.hdf5"); },
                      "virtual.hdf5: dataset 'input_ids' keeps its data outside the file");
  auto run = mlperf_run(false);
  run.data.files = kData / "bad/seq32.hdf5";
  expect_config_error(
      [&] {
        open_pretraining_data(data_source(run), tiny_model(), {2, kSeq});
      },
      "holds sequences of 32 tokens, but model.seq_len is 16");
  BertConfig small_vocab = tiny_model();
  small_vocab.vocab_size = 20;
  const auto data = open_pretraining_data(data_source(mlperf_run(false)), small_vocab, {2, kSeq});
  expect_config_error([&] { data->batch(0); }, "outside the model's vocabulary of 20");
  // Labels past the vocabulary, or an NSP label that is not 0 or 1: named
  // with file and row before anything indexes with them.
  run = mlperf_run(false);
  run.data.files = kData / "bad/lm_label.hdf5";
  expect_config_error(
      [&] {
        open_pretraining_data(data_source(run), tiny_model(), {2, kSeq})->batch(0);
      },
      "lm_label.hdf5 (row 1): masked_lm_ids[0] = 100000 outside the model's "
      "vocabulary");
  run.data.files = kData / "bad/nsp_label.hdf5";
  expect_config_error(
      [&] {
        open_pretraining_data(data_source(run), tiny_model(), {2, kSeq})->batch(0);
      },
      "nsp_label.hdf5 (row 1): next_sentence_labels = 7: expected 0 or 1");
}

TEST(MlperfHdf5, AFileThatCrashesLibhdf5IsAnErrorNotACrash) {
  // Debian 12's libhdf5 (1.10) segfaults in H5Dread on this file
  // (make_mlperf_hdf5.py): it is parsed in a child process first, so this
  // process lives on. The signal is SIGSEGV, or SIGABRT where
  // AddressSanitizer catches the overflow in the child first (the sanitizer
  // run of this suite). Debian 13's libhdf5 (1.14) reads it without
  // crashing and the reader refuses what it holds: either way an error
  // naming the file, never a crash.
  auto run = mlperf_run(false);
  run.data.files = kData / "bad/libhdf5_segfault.hdf5";
  try {
    open_pretraining_data(data_source(run), tiny_model(), {2, kSeq})->batch(0);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    if (message.find("libhdf5 crashed") != std::string::npos) {
      EXPECT_NE(message.find("libhdf5_segfault.hdf5: libhdf5 crashed reading this file (signal "),
                std::string::npos)
          << message;
      EXPECT_TRUE(message.find("(SIGSEGV)") != std::string::npos ||
                  message.find("(SIGABRT)") != std::string::npos)
          << message;
      EXPECT_NE(message.find("it is corrupt or crafted"), std::string::npos) << message;
    } else {
      EXPECT_NE(message.find("libhdf5_segfault.hdf5: "), std::string::npos) << message;
    }
  }
  const test::TempDir out;
  const auto r =
      test::run_polyhal("pack --input " + (kData / "bad/libhdf5_segfault.hdf5").string() +
                        " --output " + (out.path() / "packed").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("libhdf5_segfault.hdf5"), std::string::npos) << r.output;
}

TEST(MlperfHdf5, PretrainingRunsOnTheFilesThroughTheLauncher) {
  test::TempDir dir;
  const auto config = dir.write(
      "mlperf.yaml",
      "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 16, vocab_size: 64}\n"
      "batch: {micro: 4, grad_accum: 2}\ndata: {source: mlperf_hdf5, files: " +
          kData.string() + "}\noptimizer: {name: lamb, learning_rate: 0.001}\nsteps: 3\n");
  const auto r = test::run_polyhal("run --config " + config.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 3/3"), std::string::npos) << r.output;
  const auto wrong =
      test::run_polyhal("run --config " + config.string() + " --set model.seq_len=32");
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("mlperf.yaml:5: key 'data.files'"), std::string::npos)
      << wrong.output;
}

}  // namespace
}  // namespace polyhal
