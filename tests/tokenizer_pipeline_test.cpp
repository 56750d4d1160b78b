// Every tokenizer.json kind against Hugging Face's tokenizers library on a
// corpus of varied real text (tests/data/tokenizer_pipeline/corpus.txt:
// many scripts, emoji, control and private-use characters, long words,
// accents, CJK): identical ids, type ids and byte offsets for single texts
// and pairs truncated longest first at 8, 16 and 32 tokens, and the same
// decoded text. The files and the reference come from
// tests/data/tokenizer_pipeline/make_pipeline_tokenizers.py.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include <fmt/format.h>

#include <cmath>

#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kData =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/tokenizer_pipeline";

/// The lines `kind`'s references were written for.
std::vector<std::string> corpus(const std::string& kind = "") {
  std::ifstream in(kData / (kind.ends_with("_added") ? "added_lines.txt" : "corpus.txt"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<nlohmann::json> references(const std::string& kind) {
  std::ifstream in(kData / "reference.jsonl");
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line);
    if (record.at("kind") == kind) out.push_back(std::move(record));
  }
  return out;
}

std::vector<std::vector<std::uint32_t>> offsets_of(const Encoding& e, std::size_t n) {
  std::vector<std::vector<std::uint32_t>> out;
  for (std::size_t i = 0; i < n && i < e.offsets.size(); ++i)
    out.push_back({e.offsets[i].first, e.offsets[i].second});
  return out;
}

template <class T>
std::vector<T> first(const std::vector<T>& v, std::size_t n) {
  return std::vector<T>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size())));
}

/// The windows of each truncation the reference ran (or its refusal).
void expect_windows(const Tokenizer& tokenizer, const nlohmann::json& windows,
                    const std::string& line, const std::string& partner, const std::string& where) {
  static const std::map<std::string, Truncation::Strategy> strategies{
      {"longest_first", Truncation::Strategy::longest_first},
      {"only_first", Truncation::Strategy::only_first},
      {"only_second", Truncation::Strategy::only_second}};
  for (std::size_t k = 0; k < windows.size(); ++k) {
    const auto& w = windows[k];
    const auto& cases =
        std::vector<std::tuple<std::int64_t, std::size_t, const char*, const char*, bool>>{
            {24, 4, "only_second", "right", true},
            {16, 2, "longest_first", "left", true},
            {12, 3, "only_first", "right", false},
            {10, 0, "longest_first", "right", false}};
    const auto [length, stride, strategy, direction, pair] = cases.at(k);
    const Truncation t{strategies.at(strategy),
                       std::string(direction) == "left" ? Truncation::Direction::left
                                                        : Truncation::Direction::right,
                       stride};
    const std::string at = fmt::format("{} (windows {} {} stride {} at {})", where, strategy,
                                       direction, stride, length);
    const auto second = pair ? std::optional<std::string>(partner) : std::nullopt;
    if (w.contains("refused")) {
      EXPECT_THROW(tokenizer.encode_windows(line, second, length, t), ConfigError) << at;
      continue;
    }
    const auto got = tokenizer.encode_windows(line, second, length, t);
    const auto& want = w.at("encodings");
    ASSERT_EQ(got.size(), want.size()) << at;
    for (std::size_t e = 0; e < got.size(); ++e) {
      const std::size_t m = want[e].at("ids").size();
      EXPECT_EQ(first(got[e].input_ids, m), want[e].at("ids").get<std::vector<std::int32_t>>())
          << at << " window " << e;
      EXPECT_EQ(offsets_of(got[e], m),
                want[e].at("offsets").get<std::vector<std::vector<std::uint32_t>>>())
          << at << " window " << e;
    }
  }
}

/// Every line of the corpus as the reference encodes it.
void expect_reference(const std::string& kind) {
  const auto lines = corpus(kind);
  const auto records = references(kind);
  ASSERT_EQ(records.size(), lines.size()) << kind;
  const auto file = kind == "roberta_slow_files" ? "vocab.json"
                    : kind == "xlmr_slow_files"  ? "sentencepiece.bpe.model"
                                                 : "tokenizer.json";
  const auto tokenizer = open_tokenizer({kData / kind / file, TokenizerOptions{}});
  int failures = 0;
  for (const auto& r : records) {
    const std::size_t i = r.at("line");
    const std::string& line = lines[i];
    const std::string where = kind + " line " + std::to_string(i + 1) + ": " + line;
    const auto& bare = r.at("bare");
    EXPECT_EQ(tokenizer->ids(line), bare.at("ids").get<std::vector<std::int32_t>>()) << where;
    const Encoding framed = tokenizer->encode(line, std::nullopt, 0);
    const auto& want = r.at("framed");
    const std::size_t n = want.at("ids").size();
    EXPECT_EQ(framed.input_ids, want.at("ids").get<std::vector<std::int32_t>>()) << where;
    EXPECT_EQ(framed.token_type_ids, want.at("types").get<std::vector<std::int32_t>>()) << where;
    EXPECT_EQ(offsets_of(framed, n),
              want.at("offsets").get<std::vector<std::vector<std::uint32_t>>>())
        << where;
    const std::string& partner = lines[(i + 1) % lines.size()];
    for (const auto& pair : r.at("pairs")) {
      const std::int64_t length = pair.at("max_length");
      const Encoding e = tokenizer->encode(line, partner, length);
      const std::size_t m = pair.at("ids").size();
      const std::string at = where + " (pair at " + std::to_string(length) + ")";
      EXPECT_EQ(first(e.input_ids, m), pair.at("ids").get<std::vector<std::int32_t>>()) << at;
      EXPECT_EQ(first(e.token_type_ids, m), pair.at("types").get<std::vector<std::int32_t>>())
          << at;
      EXPECT_EQ(offsets_of(e, m), pair.at("offsets").get<std::vector<std::vector<std::uint32_t>>>())
          << at;
      EXPECT_EQ(e.input_ids.size(), static_cast<std::size_t>(std::max<std::int64_t>(length, m)))
          << at;
    }
    EXPECT_EQ(tokenizer->decode(framed.input_ids), r.at("decoded").get<std::string>()) << where;
    expect_windows(*tokenizer, r.at("windows"), line, partner, where);
    if (::testing::Test::HasFailure() && ++failures > 6) return;  // the first few say enough
  }
}

TEST(TokenizerPipeline, WordPieceEqualsTheReference) {
  expect_reference("wordpiece");
}

TEST(TokenizerPipeline, ByteLevelBpeEqualsTheReference) {
  expect_reference("bpe_byte_level");
}

TEST(TokenizerPipeline, RobertasSlowFilesReadAsTheFastTokenizerConvertsThem) {
  expect_reference("roberta_slow_files");
}

TEST(TokenizerPipeline, XlmrsSentencePieceModelReadsAsTheFastTokenizerConvertsIt) {
  expect_reference("xlmr_slow_files");
}

TEST(TokenizerPipeline, UnigramWithPrecompiledEqualsTheReference) {
  expect_reference("unigram_precompiled");
}

// tokenizers' SentencePieceUnigramTokenizer: Nmt (control characters
// dropped, tabs, newlines and zero-width spaces made spaces), NFKC, Replace.
TEST(TokenizerPipeline, UnigramWithNmtEqualsTheReference) {
  expect_reference("unigram_nmt");
}

// Added tokens of every kind: normalized ones matched in the normalised
// text ("HELLO WORLD" as "hello world", "ﬁne" as "fine"), raw ones in the
// raw text, single_word, lstrip and rstrip beside Unicode spaces, special.
TEST(TokenizerPipeline, AddedTokensOfEveryKindSplitAsTheReference) {
  expect_reference("wordpiece_added");
  expect_reference("unigram_added");
}

// A malformed SentencePiece model, or one of another tokenizer class than
// XLM-R's, is refused naming the file and what is wrong.
TEST(TokenizerPipeline, ASentencePieceModelPolyhalCannotReadIsRefusedByName) {
  test::TempDir dir;
  const auto refused = [&](const std::string& bytes, const std::string& needle) {
    const auto file = dir.path() / "sentencepiece.bpe.model";
    std::ofstream(file, std::ios::binary) << bytes;
    try {
      open_tokenizer({file, {}});
      ADD_FAILURE() << "accepted " << needle;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(std::string("\x0a\xff\xff\xff", 4), "not a SentencePiece model (its protobuf");
  refused(std::string("\x0a\x05"
                      "ab",
                      4),
          "not a SentencePiece model (its protobuf");
  refused(std::string("\x0a\x02\x0a\x00", 4), "a SentencePiece model of 1 pieces");
  std::ifstream in(kData / "xlmr_slow_files/sentencepiece.bpe.model", std::ios::binary);
  const std::string model((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  dir.write("tokenizer_config.json", R"({"tokenizer_class": "T5Tokenizer"})");
  refused(model, "T5Tokenizer over a SentencePiece model");
}

// One tokenizer shared by four threads encodes every line as one thread
// does (the served model tokenizes on its preparation pool).
TEST(TokenizerPipeline, OneTokenizerIsSafeFromSeveralThreads) {
  const auto lines = corpus();
  for (const char* kind : {"wordpiece", "bpe_byte_level", "unigram_precompiled"}) {
    const auto tokenizer = open_tokenizer({kData / kind / "tokenizer.json", {}});
    std::vector<std::vector<std::int32_t>> alone;
    for (const auto& line : lines)
      alone.push_back(tokenizer->encode(line, std::nullopt, 0).input_ids);
    std::vector<std::vector<std::vector<std::int32_t>>> shared(4, alone);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < shared.size(); ++t)
      threads.emplace_back([&, t] {
        for (int round = 0; round < 20; ++round)
          for (std::size_t i = 0; i < lines.size(); ++i)
            shared[t][i] = tokenizer->encode(lines[i], std::nullopt, 0).input_ids;
      });
    for (auto& thread : threads) thread.join();
    for (const auto& each : shared) EXPECT_EQ(each, alone) << kind;
  }
}

// A tokenizer holding more tokens than the model's embedding is refused
// when it opens, naming the file (every task opens the card's spec).
TEST(TokenizerPipeline, AVocabularyLargerThanTheModelsIsRefusedAtOpen) {
  const auto file = kData / "bpe_byte_level/tokenizer.json";
  EXPECT_NO_THROW(open_tokenizer({file, {}, 1200}));
  try {
    open_tokenizer({file, {}, 1000});
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(
        std::string(e.what()).find(file.string() + ": vocabulary has 1200 tokens but the model's "
                                                   "vocab_size is 1000"),
        std::string::npos)
        << e.what();
  }
}

// A BERT encoder with XLM-R's Unigram tokenizer.json and Precompiled map,
// as paraphrase-multilingual-MiniLM-L12-v2 is laid out (seeded weights:
// tests/data/multilingual_layout/make_multilingual_layout.py), embeds every
// line of the varied corpus within 1e-5 cosine of sentence-transformers 6.2.
TEST(TokenizerPipeline, AnXlmrTokenizedBertEmbedsAsSentenceTransformers) {
  const auto data = kData.parent_path() / "multilingual_layout";
  const auto reference = read_safetensors(data / "reference.safetensors").at("embeddings");
  test::TempDir dir;
  const auto output = dir.path() / "out.jsonl";
  const auto config = dir.write(
      "m.yaml",
      fmt::format("backend: cpu\ntask: inference\nmodel: {{dir: {}}}\nbatch: {{micro: "
                  "8}}\ndata: {{source: text, text_file: {}}}\ninference: {{output: {}}}\n",
                  (data / "model").string(), (data / "lines.txt").string(), output.string()));
  const auto r = test::run_polyhal("run --config " + config.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(output);
  std::vector<std::vector<float>> mine;
  for (std::string line; std::getline(in, line);)
    mine.push_back(nlohmann::json::parse(line).at("embedding").get<std::vector<float>>());
  ASSERT_EQ(static_cast<std::int64_t>(mine.size()), reference.shape[0]);
  const auto width = static_cast<std::size_t>(reference.shape[1]);
  for (std::size_t s = 0; s < mine.size(); ++s) {
    ASSERT_EQ(mine[s].size(), width);
    double dot = 0, a = 0, b = 0;
    for (std::size_t i = 0; i < width; ++i) {
      const double x = mine[s][i], y = reference.values[s * width + i];
      dot += x * y;
      a += x * x;
      b += y * y;
    }
    EXPECT_GE(dot / std::sqrt(a * b), 1.0 - 1e-5) << "line " << s + 1;
  }
}

}  // namespace
}  // namespace polyhal
