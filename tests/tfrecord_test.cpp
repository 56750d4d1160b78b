// TFRecord pre-training data: files TensorFlow wrote
// (tests/data/tfrecord/make_tfrecords.py) in Google's layout, Habana's and
// Graphcore's packed layouts, plain and GZIP, give the rows TensorFlow
// parses (reference.json); packed rows arrive in polyhal's packed layout;
// damaged files are errors naming file and record; pre-training runs on
// them from a TensorFlow checkpoint on every backend.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/app/tfrecord_data.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kData =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/tfrecord";
const std::filesystem::path kCheckpoint =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/tf_checkpoint/google/model.ckpt-7";

using test::expect_config_error;

nlohmann::json reference() {
  std::ifstream in(kData / "reference.json");
  return nlohmann::json::parse(in);
}

template <class T>
std::vector<T> values(const nlohmann::json& j) {
  return j.get<std::vector<T>>();
}

void expect_google_rows(const std::filesystem::path& files,
                        TfRecordLayout layout = TfRecordLayout::google) {
  const auto want = reference()["google"];
  const TfRecordSet set(files);
  EXPECT_EQ(set.layout(), layout);
  ASSERT_EQ(set.size(), static_cast<std::int64_t>(want.size()));
  EXPECT_EQ(set.seq_len(), 32);
  EXPECT_EQ(set.max_predictions(), 5);
  for (std::int64_t r = 0; r < set.size(); ++r) {
    const auto& row = want[static_cast<std::size_t>(r)];
    const MlperfSample s = set.sample(r);
    EXPECT_EQ(s.input_ids, values<std::int32_t>(row["input_ids"])) << r;
    EXPECT_EQ(s.input_mask, values<std::int32_t>(row["input_mask"])) << r;
    EXPECT_EQ(s.segment_ids, values<std::int32_t>(row["segment_ids"])) << r;
    EXPECT_EQ(s.masked_lm_positions, values<std::int32_t>(row["masked_lm_positions"])) << r;
    EXPECT_EQ(s.masked_lm_ids, values<std::int32_t>(row["masked_lm_ids"])) << r;
    EXPECT_EQ(s.next_sentence_label, row["next_sentence_labels"][0].get<std::int32_t>()) << r;
  }
}

TEST(TfRecord, GoogleLayoutRowsEqualWhatTensorFlowParses) {
  expect_google_rows(kData / "google");
  const TfRecordSet set(kData / "google");
  EXPECT_EQ(set.files().size(), 2u);
  EXPECT_FALSE(set.any_gzip());
  EXPECT_EQ(set.sample(26).file.filename(), "part-00001-of-00002");
  EXPECT_EQ(set.sample(26).row, 1);
}

TEST(TfRecord, GraphcoreRemaskedRowsAreGoogleRowsAgain) {
  expect_google_rows(kData / "graphcore_remasked", TfRecordLayout::graphcore_remasked);
  expect_google_rows(kData / "graphcore_remasked_gzip", TfRecordLayout::graphcore_remasked);
}

TEST(TfRecord, GzipFilesGiveTheSameRowsInAnyOrder) {
  expect_google_rows(kData / "google_gzip");
  const TfRecordSet set(kData / "google_gzip");
  EXPECT_TRUE(set.any_gzip());
  // Backwards and interleaved, as replicas read: the cursors restart.
  const TfRecordSet plain(kData / "google");
  for (const std::int64_t r : {39, 3, 38, 4, 0, 20, 21, 5})
    EXPECT_EQ(set.sample(r).input_ids, plain.sample(r).input_ids) << r;
}

/// The record order of `epochs` epochs of `set`, one vector per epoch.
std::vector<std::vector<std::int64_t>> epochs_of(const TfRecordSet& set, std::uint64_t epochs) {
  const auto n = static_cast<std::uint64_t>(set.size());
  std::vector<std::vector<std::int64_t>> out(epochs);
  for (std::uint64_t p = 0; p < epochs * n; ++p) out[p / n].push_back(set.record_at(p));
  return out;
}

TEST(TfRecord, GzipDataIsShuffledInBlocksAfterASeededFileOrder) {
  constexpr std::int64_t kBuffer = 8;
  // The two plain parts, each compressed as TFRecordOptions("GZIP") writes
  // it (one gzip stream over the frames).
  const test::TempDir dir;
  const auto gzip_dir = dir.path() / "google_gzip_parts";
  std::filesystem::create_directories(gzip_dir);
  for (const char* part : {"part-00000-of-00002", "part-00001-of-00002"})
    ASSERT_EQ(std::system(fmt::format("gzip -c '{}' > '{}'", (kData / "google" / part).string(),
                                      (gzip_dir / part).string())
                              .c_str()),
              0);
  TfRecordSet set(gzip_dir);
  ASSERT_TRUE(set.any_gzip());
  ASSERT_EQ(set.files().size(), 2u);
  const std::int64_t first_file = set.sample(0).file == set.sample(24).file ? 25 : 0;
  ASSERT_EQ(first_file, 25) << "the fixture's first file holds records 0-24";
  set.shuffle_in_blocks(7, kBuffer);
  const auto epochs = epochs_of(set, 8);
  std::set<std::vector<std::int64_t>> distinct;
  int second_file_first = 0;
  for (const auto& epoch : epochs) {
    // Every record once per epoch.
    std::vector<std::int64_t> sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    for (std::int64_t r = 0; r < set.size(); ++r) ASSERT_EQ(sorted[static_cast<std::size_t>(r)], r);
    // The stream is one file after the other; each block of 8 holds the
    // next 8 records of that stream, in another order.
    const bool swapped = epoch.front() >= first_file;
    second_file_first += swapped ? 1 : 0;
    std::vector<std::int64_t> stream;
    for (std::int64_t r = 0; r < set.size(); ++r)
      stream.push_back(swapped ? (r + first_file) % set.size() : r);
    bool reordered = false;
    for (std::size_t start = 0; start < epoch.size(); start += kBuffer) {
      const auto end = std::min(epoch.size(), start + kBuffer);
      std::vector<std::int64_t> block(epoch.begin() + static_cast<std::ptrdiff_t>(start),
                                      epoch.begin() + static_cast<std::ptrdiff_t>(end));
      reordered |= !std::equal(block.begin(), block.end(), stream.begin() + start);
      std::sort(block.begin(), block.end());
      std::vector<std::int64_t> want(stream.begin() + static_cast<std::ptrdiff_t>(start),
                                     stream.begin() + static_cast<std::ptrdiff_t>(end));
      std::sort(want.begin(), want.end());
      EXPECT_EQ(block, want) << "block at " << start;
    }
    EXPECT_TRUE(reordered);
    distinct.insert(epoch);
  }
  EXPECT_EQ(distinct.size(), epochs.size()) << "another order every epoch";
  EXPECT_GT(second_file_first, 0) << "the file order changes between epochs";
  EXPECT_LT(second_file_first, 8);

  // A position names its record alone: a resumed run (a new set, read from
  // the middle of epoch 5 backwards) reads what the first one read.
  TfRecordSet resumed(gzip_dir);
  resumed.shuffle_in_blocks(7, kBuffer);
  for (std::uint64_t p = 5 * 40 + 21; p-- > 2 * 40;)
    ASSERT_EQ(resumed.record_at(p), epochs[p / 40][p % 40]) << p;
  // The rows are the plain files' rows in that order.
  TfRecordSet plain(kData / "google");
  plain.shuffle_in_blocks(7, kBuffer);
  for (std::uint64_t p = 0; p < 80; ++p) {
    const std::int64_t r = set.record_at(p);
    ASSERT_EQ(plain.record_at(p), r);
    EXPECT_EQ(set.sample(r).input_ids, plain.sample(r).input_ids) << p;
  }
  // Another seed, another order; a buffer of 1 is the stream itself.
  TfRecordSet other(gzip_dir);
  other.shuffle_in_blocks(8, kBuffer);
  EXPECT_NE(epochs_of(other, 1).front(), epochs.front());
  TfRecordSet one(gzip_dir);
  one.shuffle_in_blocks(7, 1);
  for (const auto& epoch : epochs_of(one, 3)) {
    const std::int64_t start = epoch.front();
    for (std::size_t j = 0; j < epoch.size(); ++j)
      EXPECT_EQ(epoch[j], (start + static_cast<std::int64_t>(j)) % set.size()) << j;
  }
}

void expect_packed_rows(const std::filesystem::path& files, TfRecordLayout layout) {
  const auto want = reference()["packed"];
  const TfRecordSet set(files);
  EXPECT_EQ(set.layout(), layout);
  ASSERT_EQ(set.size(), static_cast<std::int64_t>(want.size()));
  EXPECT_EQ(set.max_sequences(), 3);
  for (std::int64_t r = 0; r < set.size(); ++r) {
    const auto& row = want[static_cast<std::size_t>(r)];
    const PackedSample s = set.packed_sample(r);
    EXPECT_EQ(s.input_ids, values<std::int32_t>(row["input_ids"])) << r;
    EXPECT_EQ(s.segment_ids, values<std::int32_t>(row["segment_ids"])) << r;
    EXPECT_EQ(s.input_mask, values<std::int32_t>(row["input_mask"])) << r;
    EXPECT_EQ(s.position_ids, values<std::int32_t>(row["position_ids"])) << r;
    const auto sequences = row["next_sentence_labels"].size();
    EXPECT_EQ(s.sequences(), static_cast<std::int64_t>(sequences)) << r;
    for (std::size_t q = 0; q < sequences; ++q) {
      EXPECT_EQ(s.next_sentence_positions[q], row["next_sentence_positions"][q].get<int>()) << r;
      EXPECT_EQ(s.next_sentence_labels[q], row["next_sentence_labels"][q].get<int>()) << r;
    }
    // The vendors order masked slots alike; polyhal's row lists them first.
    const auto masked = row["masked_lm_ids"].size();
    for (std::size_t q = 0; q < s.masked_lm_weights.size(); ++q) {
      EXPECT_EQ(s.masked_lm_weights[q], q < masked ? 1.0f : 0.0f) << r;
      if (q >= masked) continue;
      EXPECT_EQ(s.masked_lm_positions[q], row["masked_lm_positions"][q].get<int>()) << r;
      EXPECT_EQ(s.masked_lm_ids[q], row["masked_lm_ids"][q].get<int>()) << r;
    }
  }
}

TEST(TfRecord, HabanaPackedRowsArePolyhalsPackedRows) {
  expect_packed_rows(kData / "habana_packed", TfRecordLayout::habana_packed);
  expect_packed_rows(kData / "habana_packed_gzip", TfRecordLayout::habana_packed);
  EXPECT_EQ(TfRecordSet(kData / "habana_packed").files().size(), 1u) << "the JSON is no data";
}

TEST(TfRecord, GraphcorePackedRowsGetTheirClsBackInFrontOfEachSequence) {
  expect_packed_rows(kData / "graphcore_packed", TfRecordLayout::graphcore_packed);
  expect_packed_rows(kData / "graphcore_packed_gzip", TfRecordLayout::graphcore_packed);
  EXPECT_EQ(TfRecordSet(kData / "graphcore_packed").files().size(), 1u) << ".index is no data";
}

std::string bytes_of(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// TFRecord's masked CRC-32C, computed bit by bit here (independent of polyhal's).
std::uint32_t masked_crc32c(const std::string& bytes) {
  std::uint32_t c = 0xffffffffu;
  for (const char ch : bytes) {
    c ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
  }
  c = ~c;
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/// `record` framed as TFRecord frames it, with correct CRCs.
std::string framed(const std::string& record) {
  const std::uint64_t length = record.size();
  const std::string length_bytes(reinterpret_cast<const char*>(&length), 8);
  const std::uint32_t length_crc = masked_crc32c(length_bytes), data_crc = masked_crc32c(record);
  return length_bytes + std::string(reinterpret_cast<const char*>(&length_crc), 4) + record +
         std::string(reinterpret_cast<const char*>(&data_crc), 4);
}

TEST(TfRecord, DamagedFilesAreErrorsNamingFileAndRecord) {
  test::TempDir dir;
  const std::string good = bytes_of(kData / "google/part-00001-of-00002");
  const auto damaged = [&](const std::string& name, const std::string& bytes) {
    const auto path = dir.path() / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  };
  // Records are 12 + 305 + 4 bytes here: record 1 starts at 321.
  const std::size_t frame = good.size() / 15;
  ASSERT_EQ(frame * 15, good.size());
  expect_config_error([&] { TfRecordSet s(damaged("cut", good.substr(0, good.size() - 3))); },
                      "cut: record 14 (byte " + std::to_string(14 * frame) +
                          "): " + std::to_string(frame - 16) + " bytes of data announced");
  expect_config_error(
      [&] { TfRecordSet s(damaged("cut_header", good.substr(0, frame + 5))); },
      "cut_header: record 1 (byte " + std::to_string(frame) + "): the file ends inside its header");
  std::string flipped = good;
  flipped[frame + 40] ^= 0x10;
  const TfRecordSet set(damaged("flipped", flipped));  // headers are intact
  expect_config_error([&] { set.sample(1); }, "flipped: record 1: the data's CRC does not match");
  EXPECT_NO_THROW(set.sample(2));
  std::string length = good;
  length[frame + 2] = '\x7f';
  expect_config_error(
      [&] { TfRecordSet s(damaged("length", length)); },
      "length: record 1 (byte " + std::to_string(frame) + "): the length's CRC does not match");
  // A header that is right about a huge length: refused before allocating.
  std::string huge = good.substr(0, frame);
  const std::uint64_t size = std::uint64_t{1} << 40;
  std::string header(reinterpret_cast<const char*>(&size), 8);
  const std::uint32_t crc = masked_crc32c(header);
  huge += header + std::string(reinterpret_cast<const char*>(&crc), 4);
  expect_config_error([&] { TfRecordSet s(damaged("huge", huge)); },
                      "huge: record 1 (byte " + std::to_string(frame) + "): 1099511627776 bytes");
  const std::string gz = bytes_of(kData / "google_gzip/part-00000-of-00001.gz");
  expect_config_error([&] { TfRecordSet s(damaged("cut.gz", gz.substr(0, gz.size() / 2))); },
                      "cut.gz: record");
  std::string garbage = gz;
  for (std::size_t i = 20; i < 60; ++i) garbage[i] = static_cast<char>(i * 7);
  expect_config_error([&] { TfRecordSet s(damaged("garbage.gz", garbage)); }, "garbage.gz: record");
  expect_config_error([&] { TfRecordSet s(damaged("empty", "")); }, "no records in 1 file(s)");
  test::TempDir none;
  expect_config_error([&] { TfRecordSet s(none.path()); }, "no TFRecord files in this directory");
  expect_config_error([&] { TfRecordSet s(dir.path() / "absent"); },
                      "absent: no such file or directory");
}

TEST(TfRecord, RecordsOfAnotherShapeOrKindAreNamed) {
  test::TempDir dir;
  // A file whose second record is of another layout than the first.
  const std::string google = bytes_of(kData / "google/part-00001-of-00002");
  const std::string packed = bytes_of(kData / "habana_packed/strategy_part_0");
  const std::size_t frame = google.size() / 15;
  std::uint64_t packed_length = 0;
  std::memcpy(&packed_length, packed.data(), 8);
  std::ofstream(dir.path() / "mixed", std::ios::binary)
      << google.substr(0, frame) << packed.substr(0, packed_length + 16);
  const TfRecordSet mixed(dir.path() / "mixed");
  expect_config_error([&] { mixed.sample(1); },
                      "mixed: record 1: feature 'masked_lm_positions' has 8 values, expected 5");
  // A foreign example: the features it has are listed.
  std::ofstream(dir.path() / "foreign", std::ios::binary)
      << bytes_of(kData / "graphcore_packed/wiki_000.index");
  expect_config_error([&] { TfRecordSet s(dir.path() / "foreign"); },
                      "foreign: record 0 (byte 0): the length's CRC does not match");
  // Records whose CRCs are right but whose bytes are not an Example: a
  // varint that never ends, a length past the record.
  std::ofstream(dir.path() / "varint", std::ios::binary)
      << google.substr(0, frame) << framed("\x0a" + std::string(20, '\xff'));
  const TfRecordSet varint(dir.path() / "varint");
  expect_config_error([&] { varint.sample(1); },
                      "varint: record 1: not a tf.train.Example (21 bytes)");
  std::ofstream(dir.path() / "past", std::ios::binary)
      << google.substr(0, frame) << framed("\x0a\x7f\x0a\x02");
  const TfRecordSet past(dir.path() / "past");
  expect_config_error([&] { past.sample(1); }, "past: record 1: not a tf.train.Example");
  expect_config_error(
      [&] { TfRecordReader r(std::make_unique<TfRecordSet>(kData / "habana_packed")); },
      "packed rows (habana_packed layout), read as unpacked");
}

std::filesystem::path pretrain_config(const test::TempDir& dir, const std::string& files,
                                      const std::string& extra = "") {
  return dir.write(
      "tfrecord.yaml",
      fmt::format("backend: cpu\ntask: pretrain\nmodel: {{hf_config: {}, seq_len: 32}}\n"
                  "batch: {{micro: 4, grad_accum: 2}}\n"
                  "data: {{source: tfrecord, files: {}{}}}\n"
                  "optimizer: {{name: lamb, learning_rate: 0.001}}\nsteps: 2\n"
                  "checkpoint: {{init: {}}}\n",
                  (kCheckpoint.parent_path() / "bert_config.json").string(),
                  (kData / files).string(), extra, kCheckpoint.string()));
}

TEST(TfRecord, PretrainingRunsOnEveryLayoutFromATensorFlowCheckpointOnEveryBackend) {
  test::TempDir dir;
  for (const std::string files :
       {"google", "google_gzip", "graphcore_remasked", "habana_packed", "graphcore_packed"}) {
    // GZIP streams shuffled in blocks (data.shuffle_buffer), the default.
    const auto config = pretrain_config(dir, files);
    for (const std::string backend : {"cpu", "ipu", "gaudi"}) {
      if (files != "google" && backend != "cpu" && files != "habana_packed") continue;
      const auto run =
          test::run_polyhal("run --config " + config.string() + " --backend " + backend);
      EXPECT_EQ(run.exit_code, 0) << files << " on " << backend << ": " << run.output;
      EXPECT_NE(run.output.find("step 2/2"), std::string::npos) << run.output;
      EXPECT_NE(run.output.find("TFRecord ("), std::string::npos) << run.output;
      if (files.ends_with("gzip")) {
        EXPECT_NE(run.output.find("then blocks of 10000 samples (data.shuffle_buffer, seed 0)"),
                  std::string::npos)
            << run.output;
      }
      EXPECT_NE(run.output.find("weights: " + kCheckpoint.string()), std::string::npos)
          << run.output;
    }
  }
}

TEST(TfRecord, ConfigMistakesAreNamedWithTheKey) {
  test::TempDir dir;
  const auto buffer = test::run_polyhal(
      "run --config " + pretrain_config(dir, "google_gzip", ", shuffle_buffer: 0").string());
  EXPECT_EQ(buffer.exit_code, 2) << buffer.output;
  EXPECT_NE(buffer.output.find("tfrecord.yaml:5: key 'data.shuffle_buffer': "), std::string::npos)
      << buffer.output;
  const auto packed = test::run_polyhal("run --config " +
                                        pretrain_config(dir, "google", ", packed: true").string());
  EXPECT_EQ(packed.exit_code, 2) << packed.output;
  EXPECT_NE(packed.output.find("key 'data.packed': true, but"), std::string::npos) << packed.output;
  const auto seq = test::run_polyhal("run --config " + pretrain_config(dir, "google").string() +
                                     " --set model.seq_len=16");
  EXPECT_EQ(seq.exit_code, 2) << seq.output;
  EXPECT_NE(seq.output.find("holds sequences of 32 tokens, but model.seq_len is 16"),
            std::string::npos)
      << seq.output;
  // Inference never falls back to generated data in place of the files.
  const auto inference = test::run_polyhal(
      "run --config " + dir.write("inference.yaml",
                                  "backend: cpu\ntask: inference\nmodel: {preset: tiny}\n"
                                  "data: {source: tfrecord, files: " +
                                      (kData / "google").string() + "}\n")
                            .string());
  EXPECT_EQ(inference.exit_code, 2) << inference.output;
  EXPECT_NE(inference.output.find("task inference reads generated, pattern or text data, not "
                                  "tfrecord"),
            std::string::npos)
      << inference.output;
  const auto missing = test::run_polyhal("run --config " + pretrain_config(dir, "google").string() +
                                         " --set data.files=nowhere");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("key 'data.files': " + (dir.path() / "nowhere").string() +
                                ": no such file or directory"),
            std::string::npos)
      << missing.output;
}

}  // namespace
}  // namespace polyhal
