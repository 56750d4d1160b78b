// `polyhal prepare-data`: the instances BERT's create_pretraining_data.py
// makes, checked by their statistics and invariants on a small corpus
// written for the tests (tests/data/corpus), reproducible whatever the
// thread count, readable by the MLPerf reader, trainable by `pretrain`; and
// bad input told clearly with nothing half-written.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "polyhal/app/mlperf_hdf5.hpp"
#include "polyhal/app/prepare_data.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kCorpus =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/corpus";

PrepareDataOptions corpus_options(const std::filesystem::path& output) {
  PrepareDataOptions o;
  o.inputs = {kCorpus / "text"};
  o.vocab = kCorpus / "vocab.txt";
  o.output = output;
  o.max_seq_len = 64;
  o.max_predictions = 10;
  o.dupe_factor = 10;
  o.shards = 2;
  return o;
}

std::vector<MlperfSample> read_all(const std::filesystem::path& dir) {
  const MlperfHdf5Reader reader(dir);
  std::vector<MlperfSample> out;
  for (std::int64_t i = 0; i < reader.size(); ++i) out.push_back(reader.sample(i));
  return out;
}

struct Stats {
  std::int64_t tokens = 0, masked = 0, shown_as_mask = 0, random_next = 0, split_words = 0;
  double mean_length = 0;
};

/// Statistics of `samples`, with every instance's invariants asserted.
Stats check_instances(const std::vector<MlperfSample>& samples, const Tokenizer& vocab,
                      std::int64_t max_predictions) {
  const std::int32_t cls = vocab.id("[CLS]"), sep = vocab.id("[SEP]"), mask = vocab.id("[MASK]");
  Stats s;
  for (const auto& sample : samples) {
    std::int64_t length = 0;
    while (length < static_cast<std::int64_t>(sample.input_mask.size()) &&
           sample.input_mask[static_cast<std::size_t>(length)] == 1)
      ++length;
    s.tokens += length;
    const auto& ids = sample.input_ids;
    // [CLS] A [SEP] B [SEP]: segment 0 up to the first [SEP], 1 after (a
    // masked token may read [SEP]: a random word of the whole vocabulary).
    EXPECT_EQ(ids[0], cls);
    EXPECT_EQ(ids[static_cast<std::size_t>(length - 1)], sep);
    std::int64_t first_sep = -1;
    for (std::int64_t t = 0; t < length; ++t)
      if (sample.segment_ids[static_cast<std::size_t>(t)] == 0) first_sep = t;
    EXPECT_EQ(ids[static_cast<std::size_t>(first_sep)], sep);
    EXPECT_GE(first_sep, 2) << "A has a token";
    EXPECT_LE(first_sep, length - 3) << "B has a token";
    for (std::int64_t t = 0; t < length; ++t)
      EXPECT_EQ(sample.segment_ids[static_cast<std::size_t>(t)], t <= first_sep ? 0 : 1) << t;
    std::map<std::int64_t, std::int32_t> labels;  // position -> original token
    std::int32_t previous = 0;
    for (std::size_t k = 0; k < sample.masked_lm_positions.size(); ++k) {
      const std::int32_t p = sample.masked_lm_positions[k];
      if (p == 0) continue;  // padding
      EXPECT_GT(p, previous) << "positions ascend";
      previous = p;
      EXPECT_NE(p, first_sep);
      EXPECT_LT(p, length - 1);
      labels[p] = sample.masked_lm_ids[k];
      s.shown_as_mask += ids[static_cast<std::size_t>(p)] == mask ? 1 : 0;
    }
    EXPECT_LE(static_cast<std::int64_t>(labels.size()), max_predictions);
    EXPECT_GE(labels.size(), 1u);
    s.masked += static_cast<std::int64_t>(labels.size());
    s.random_next += sample.next_sentence_label;
    // A word split by masking: a masked piece next to an unmasked piece of
    // the same word. (Truncation from the front can leave B starting with
    // a "##" piece; the reference groups it with A's last word.)
    const auto original = [&](std::int64_t t) {
      const auto it = labels.find(t);
      return it != labels.end() ? it->second : ids[static_cast<std::size_t>(t)];
    };
    for (std::int64_t t = 2; t < length - 1; ++t) {
      if (t - 1 == first_sep || !vocab.token(original(t)).starts_with("##")) continue;
      if (labels.contains(t) != labels.contains(t - 1)) ++s.split_words;
    }
  }
  s.mean_length = static_cast<double>(s.tokens) / static_cast<double>(samples.size());
  return s;
}

TEST(PrepareData, InstancesHaveTheReferencesStatisticsAndNeverSplitAWord) {
  test::TempDir dir;
  const auto opened = open_tokenizer({kCorpus / "vocab.txt", TokenizerOptions{true}});
  const Tokenizer& vocab = *opened;
  PrepareDataOptions options = corpus_options(dir.path() / "wwm");
  options.whole_word_masking = true;
  const PrepareDataReport report = prepare_pretraining_data(options);
  EXPECT_EQ(report.files, 2);
  EXPECT_EQ(report.documents, 32);  // 14 + 18 in the two files
  EXPECT_EQ(report.files_written.size(), 2u);
  const auto samples = read_all(options.output);
  ASSERT_EQ(static_cast<std::int64_t>(samples.size()), report.instances);
  ASSERT_GT(samples.size(), 500u);
  const Stats s = check_instances(samples, vocab, options.max_predictions);
  // 15% of each instance's tokens (rounded, at most 10), [CLS] and [SEP] never.
  const double masked = static_cast<double>(s.masked) / static_cast<double>(s.tokens);
  EXPECT_GT(masked, 0.13);
  EXPECT_LT(masked, 0.17);
  // 80% of the masked tokens read [MASK]; the rest themselves or random.
  const double shown = static_cast<double>(s.shown_as_mask) / static_cast<double>(s.masked);
  EXPECT_GT(shown, 0.76);
  EXPECT_LT(shown, 0.84);
  // Half of the multi-segment chunks and every single-segment one take a
  // random next segment: at least half, more with these short documents.
  const double random_next =
      static_cast<double>(s.random_next) / static_cast<double>(samples.size());
  EXPECT_GT(random_next, 0.5);
  EXPECT_LT(random_next, 0.8);
  EXPECT_EQ(s.split_words, 0) << "whole-word masking split a word";

  // Without whole-word masking pieces are masked alone (the check can fail).
  options.whole_word_masking = false;
  options.output = dir.path() / "pieces";
  prepare_pretraining_data(options);
  EXPECT_GT(check_instances(read_all(options.output), vocab, 10).split_words, 10);

  // short_seq_prob: every target length drawn short makes shorter instances.
  options.output = dir.path() / "short";
  options.short_seq_prob = 1.0;
  prepare_pretraining_data(options);
  EXPECT_LT(check_instances(read_all(options.output), vocab, 10).mean_length, 0.8 * s.mean_length);
}

TEST(PrepareData, TheSameSeedAndShardsGiveTheSameFilesWhateverTheThreads) {
  test::TempDir dir;
  const auto make = [&](const std::string& name, int threads, std::uint64_t seed) {
    PrepareDataOptions options = corpus_options(dir.path() / name);
    options.threads = threads;
    options.seed = seed;
    options.dupe_factor = 3;
    prepare_pretraining_data(options);
    return read_all(options.output);
  };
  const auto one = make("one", 1, 5), two = make("two", 2, 5), other = make("other", 2, 6);
  ASSERT_EQ(one.size(), two.size());
  bool differs = one.size() != other.size();
  for (std::size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].input_ids, two[i].input_ids) << i;
    ASSERT_EQ(one[i].masked_lm_positions, two[i].masked_lm_positions) << i;
    ASSERT_EQ(one[i].masked_lm_ids, two[i].masked_lm_ids) << i;
    ASSERT_EQ(one[i].next_sentence_label, two[i].next_sentence_label) << i;
    differs = differs || i >= other.size() || one[i].input_ids != other[i].input_ids;
  }
  EXPECT_TRUE(differs) << "another seed, other instances";
}

// prepare-data's files train as they are, and packed.
TEST(PrepareData, OutputTrainsWithPretrainUnpackedAndPacked) {
  test::TempDir dir;
  const auto made = test::run_polyhal(fmt::format(
      "prepare-data --input {} --vocab {} --output {} --max-seq-len 64 --max-predictions 10 "
      "--dupe-factor 2 --shards 2 --pack spfhp",
      (kCorpus / "text").string(), (kCorpus / "vocab.txt").string(),
      (dir.path() / "data").string()));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_NE(made.output.find("read 2 files"), std::string::npos) << made.output;
  EXPECT_NE(made.output.find("wrote " + (dir.path() / "data/part-00001-of-00002.hdf5").string()),
            std::string::npos)
      << made.output;
  EXPECT_NE(made.output.find("packed "), std::string::npos) << made.output;
  const auto config = dir.write(
      "p.yaml",
      "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 64, vocab_size: 100}\n"
      "batch: {micro: 4}\noptimizer: {name: adamw, learning_rate: 0.001}\nsteps: 3\n"
      "log: {every: 1}\ndata: {source: mlperf_hdf5, files: data}\n");
  for (const char* files : {"data", "data/packed"}) {
    const auto metrics = dir.path() / "m.jsonl";
    const auto r =
        test::run_polyhal(fmt::format("run --config {} --set data.files={} --metrics-out {}",
                                      config.string(), files, metrics.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto losses = test::step_losses(metrics);
    ASSERT_EQ(losses.size(), 3u) << files;
    for (const double loss : losses) EXPECT_TRUE(std::isfinite(loss) && loss > 1.0) << files;
  }
}

TEST(PrepareData, BadInputIsToldAndNothingIsHalfWritten) {
  test::TempDir dir;
  // Invalid UTF-8: replaced, counted, the first place named.
  dir.write("in/a.txt",
            "the river is old.\nthe city \xff\xfe is new.\n\nthe road.\nthe \xc3 king.\n");
  auto r = test::run_polyhal(
      fmt::format("prepare-data --input {} --vocab {} --output {} --dupe-factor 1",
                  (dir.path() / "in").string(), (kCorpus / "vocab.txt").string(),
                  (dir.path() / "out").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 byte sequences of invalid UTF-8 replaced"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("first at " + (dir.path() / "in/a.txt").string() + ":2"),
            std::string::npos)
      << r.output;
  // Several inputs after one --input, as docs/pretraining.md writes it.
  dir.write("more.txt", "the king is old.\nthe road is new.\n");
  r = test::run_polyhal(
      fmt::format("prepare-data --input {} {} --vocab {} --output {} --dupe-factor 1",
                  (dir.path() / "in").string(), (dir.path() / "more.txt").string(),
                  (kCorpus / "vocab.txt").string(), (dir.path() / "two").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("read 2 files"), std::string::npos) << r.output;
  // The output directory of that run holds files: refused, untouched.
  r = test::run_polyhal(fmt::format("prepare-data --input {} --vocab {} --output {}",
                                    (dir.path() / "in").string(), (kCorpus / "vocab.txt").string(),
                                    (dir.path() / "out").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--output already holds part-00000-of-00001.hdf5"), std::string::npos)
      << r.output;

  PrepareDataOptions options = corpus_options(dir.path() / "fresh");
  // A vocabulary without [MASK].
  options.vocab = dir.write("novocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n");
  test::expect_config_error([&] { prepare_pretraining_data(options); },
                            "novocab.txt: vocabulary has no [MASK] token");
  options.vocab = kCorpus / "vocab.txt";
  // No document with text; a document of removed characters only.
  options.inputs = {dir.write("blank.txt", "\n  \n\t\n")};
  test::expect_config_error([&] { prepare_pretraining_data(options); },
                            "blank.txt: no document with text");
  options.inputs = {dir.write("controls.txt", "the river.\n\nthe city.\n\n\x01\x02\n")};
  options.shards = 1;
  const auto report = prepare_pretraining_data(options);
  EXPECT_EQ(report.documents, 2);
  EXPECT_EQ(report.empty_documents, 1);
  // More shards than documents: refused before anything is written.
  options.output = dir.path() / "sharded";
  options.shards = 3;
  test::expect_config_error([&] { prepare_pretraining_data(options); },
                            "--shards: 3 shards for 2 documents");
  EXPECT_FALSE(std::filesystem::exists(options.output));
  options.shards = 1;
  options.inputs = {dir.path() / "missing.txt"};
  test::expect_config_error([&] { prepare_pretraining_data(options); },
                            "missing.txt: --input: no such file or directory");
  options.inputs = {kCorpus / "text"};
  options.max_seq_len = 4;
  test::expect_config_error([&] { prepare_pretraining_data(options); },
                            "--max-seq-len: expected 5..65536, got 4");
  // Nothing temporary is left anywhere.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

}  // namespace
}  // namespace polyhal
