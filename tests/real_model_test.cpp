// A real pretrained model (sentence-transformers/all-MiniLM-L6-v2, fetched
// by scripts/fetch-real-model.sh) on real text (tests/data/real_model/
// sentences.txt), against what transformers and sentence-transformers
// compute (tests/data/real_model/make_reference.py wrote reference.safetensors),
// and its tokenizer on the lines of a 12 MB comparison with Hugging Face's
// that once tokenized differently (tests/data/tokenizer/regression.jsonl,
// written by tests/reference_libraries/compare_tokenizers.py).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/tokenizer_files.hpp"
#include "polyhal/app/wordpiece_tokenizer.hpp"
#include "polyhal/int8.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kModel = POLYHAL_REAL_MODEL_DIR;
const std::filesystem::path kData =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/real_model";

/// The fetched model, or a failure saying how to fetch it (never a skip).
bool model_present() {
  if (std::filesystem::exists(kModel / "model.safetensors")) return true;
  ADD_FAILURE() << "the real model is missing at " << kModel.string()
                << ": run scripts/fetch-real-model.sh "
                << kModel.parent_path().parent_path().string()
                << " (scripts/test.sh and .ci/run do)";
  return false;
}

std::vector<std::string> read_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// Runs text inference on `text` with the real model; returns its JSON lines.
/// `model_keys`: more keys of the model section ("int8_scales: s.json").
std::vector<nlohmann::json> infer(const test::TempDir& dir, const std::filesystem::path& text,
                                  const std::string& precision, bool hidden,
                                  const std::string& model_keys = "") {
  const auto output = dir.path() / ("out-" + precision + (hidden ? "-hidden" : "") + ".jsonl");
  const auto config = dir.write(
      "real.yaml",
      fmt::format("backend: cpu\ntask: inference\nmodel: {{hf_config: {}, weights: {}, seq_len: "
                  "128, precision: {}{}}}\nbatch: {{micro: 8}}\ndata: {{source: text, text_file: "
                  "{}, vocab: {}}}\ninference: {{output: {}, hidden_states: {}}}\n",
                  (kModel / "config.json").string(), (kModel / "model.safetensors").string(),
                  precision, model_keys.empty() ? "" : ", " + model_keys, text.string(),
                  (kModel / "vocab.txt").string(), output.string(), hidden ? "true" : "false"));
  const auto r = test::run_polyhal("run --config " + config.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sentence embeddings: mean pooling, L2-normalised (from "),
            std::string::npos)
      << r.output;
  std::vector<nlohmann::json> lines;
  std::ifstream in(output);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

double cosine(const std::vector<float>& a, const float* b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

/// The first `bytes` of `text`, cut at a character boundary.
std::string head_of(const std::string& text, std::size_t bytes) {
  if (text.size() <= bytes) return text;
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
  return text.substr(0, bytes);
}

struct Worst {
  double value;
  std::size_t sentence;
};

TEST(RealModel, EmbeddingsAndTokensEqualTheReferenceOnRealText) {
  if (!model_present()) return;
  const auto reference = read_safetensors(kData / "reference.safetensors");
  const auto sentences = read_lines(kData / "sentences.txt");
  const auto& embeddings = reference.at("embeddings");
  ASSERT_EQ(embeddings.shape[0], static_cast<std::int64_t>(sentences.size()));
  const auto width = static_cast<std::size_t>(embeddings.shape[1]);
  // The vocabulary, to turn polyhal's tokens into ids.
  std::map<std::string, int> vocab;
  for (const auto& token : read_lines(kModel / "vocab.txt"))
    vocab.emplace(token, static_cast<int>(vocab.size()));
  test::TempDir dir;
  // f16 on the CPU: f16 products in the encoder's linears (f32 tensors).
  for (const std::string precision : {"f32", "bf16", "f16"}) {
    if (const auto why = test::cpu_without_bf16(); why && precision == "bf16") {
      std::cout << "bf16 skipped: " << *why << "\n";
      continue;
    }
    const auto lines = infer(dir, kData / "sentences.txt", precision, false);
    ASSERT_EQ(lines.size(), sentences.size()) << precision;
    Worst diff{0, 0}, cos{1, 0};
    std::size_t offset = 0, token_mismatches = 0;
    const auto& ids = reference.at("ids").values;
    const auto& lengths = reference.at("lengths").values;
    for (std::size_t s = 0; s < sentences.size(); ++s) {
      const auto mine = lines[s]["embedding"].get<std::vector<float>>();
      ASSERT_EQ(mine.size(), width);
      const float* theirs = embeddings.values.data() + s * width;
      for (std::size_t i = 0; i < width; ++i) {
        const double d = std::fabs(static_cast<double>(mine[i]) - theirs[i]);
        if (d > diff.value) diff = {d, s};
      }
      if (const double c = cosine(mine, theirs); c < cos.value) cos = {c, s};
      // Tokens: ids equal BertTokenizerFast's, real tokens only.
      const auto count = static_cast<std::size_t>(lengths[s]);
      std::vector<int> mine_ids;
      for (const auto& token : lines[s]["tokens"]) {
        const auto text = token.get<std::string>();
        if (text == "[PAD]") break;
        mine_ids.push_back(vocab.count(text) ? vocab.at(text) : -1);
      }
      std::vector<int> their_ids(ids.begin() + static_cast<std::ptrdiff_t>(offset),
                                 ids.begin() + static_cast<std::ptrdiff_t>(offset + count));
      if (mine_ids != their_ids) {
        ++token_mismatches;
        ADD_FAILURE() << "sentence " << s + 1 << " tokenised differently: " << sentences[s];
      }
      offset += count;
    }
    std::cout << fmt::format(
        "{}: {} sentences; embeddings max abs difference {:.3g} (sentence {}), worst cosine "
        "{:.8f} (sentence {}: {}); {} tokenised differently\n",
        precision, sentences.size(), diff.value, diff.sentence + 1, cos.value, cos.sentence + 1,
        head_of(sentences[cos.sentence], 60), token_mismatches);
    if (precision == "f32") {
      EXPECT_LE(diff.value, 1e-4) << "sentence " << diff.sentence + 1;
      EXPECT_GE(cos.value, 0.99999) << "sentence " << cos.sentence + 1;
    } else {
      // f16 keeps 3 more mantissa bits than bf16 in every product.
      EXPECT_GE(cos.value, precision == "f16" ? 0.99995 : 0.999) << "sentence " << cos.sentence + 1;
    }
  }
}

// INT8 (model.precision int8) against sentence-transformers' f32
// embeddings, printed for docs/bert.md. Scales calibrated at f32 on the
// first 400 sentences. Dynamic activations smoothed with the calibrated
// per-channel maxima must keep every sentence at 0.99 or more (the issue's
// bar) with eight-bit weights; plain dynamic (no file), static, and every
// mode with seven-bit weights are held to what was measured, so a
// regression shows (docs/bert.md, "INT8").
TEST(RealModel, Int8EmbeddingsKeepTheirDirection) {
  if (!model_present()) return;
  if (const auto why = test::cpu_without_int8()) GTEST_SKIP() << *why;
  const auto reference = read_safetensors(kData / "reference.safetensors");
  const auto sentences = read_lines(kData / "sentences.txt");
  const auto& embeddings = reference.at("embeddings");
  const auto width = static_cast<std::size_t>(embeddings.shape[1]);
  test::TempDir dir;
  constexpr std::size_t kCalibration = 400;
  std::string first;
  for (std::size_t s = 0; s < kCalibration; ++s) first += sentences[s] + "\n";
  const auto scales = dir.path() / "scales.json";
  infer(dir, dir.write("calibration.txt", first), "f32", false, "calibrate: " + scales.string());
  ASSERT_TRUE(std::filesystem::exists(scales));
  struct Mode {
    std::string name, keys;
    double bar;
  };
  // Seven-bit weights (a CPU without VNNI, int8.hpp) measured 0.9889,
  // 0.9838 and 0.9118 on an AMD EPYC Zen 3: held to those, below the bar.
  const bool seven_bit = test::cpu_int8_weight_max() == kInt7Max;
  const std::vector<Mode> modes{
      {"dynamic, smoothed", "int8_activations: dynamic, int8_scales: " + scales.string(),
       seven_bit ? 0.988 : 0.99},
      {"dynamic", "int8_activations: dynamic", seven_bit ? 0.983 : 0.985},
      // Calibrated on packed rows (real tokens only, no padding): 0.9175
      // measured, against 0.9239 when padding tokens were calibrated on too;
      // 0.9113 (mean 0.9764 either way) since the bf16 attention of packed
      // rows runs in f32 (onednn_attention.cpp): the worst sentence of static
      // int8 moves by that much with the attention's order of sums.
      {"static", "int8_activations: static, int8_scales: " + scales.string(), 0.905}};
  for (const auto& mode : modes) {
    const auto lines = infer(dir, kData / "sentences.txt", "int8", false, mode.keys);
    ASSERT_EQ(lines.size(), sentences.size());
    Worst worst{1, 0}, unseen{1, 0};
    double sum = 0;
    for (std::size_t s = 0; s < sentences.size(); ++s) {
      const double c = cosine(lines[s]["embedding"].get<std::vector<float>>(),
                              embeddings.values.data() + s * width);
      if (c < worst.value) worst = {c, s};
      if (s >= kCalibration && c < unseen.value) unseen = {c, s};
      sum += c;
    }
    std::cout << fmt::format(
        "int8 {}: {} sentences; worst cosine {:.6f} (sentence {}: {}); not calibrated on: worst "
        "{:.6f}; mean {:.6f}\n",
        mode.name, sentences.size(), worst.value, worst.sentence + 1,
        head_of(sentences[worst.sentence], 60), unseen.value,
        sum / static_cast<double>(sentences.size()));
    EXPECT_GE(worst.value, mode.bar) << mode.name << ", sentence " << worst.sentence + 1;
  }
}

TEST(RealModel, TokenizerRegressionSampleEqualsBertTokenizerFast) {
  if (!model_present()) return;
  const auto vocab = kModel / "vocab.txt";
  const auto files = read_tokenizer_files(vocab);
  ASSERT_EQ(files.lower_case, std::optional<bool>(true));
  ASSERT_EQ(files.max_chars_per_word, kHuggingFaceMaxCharsPerWord) << "from tokenizer.json";
  TokenizerOptions options;
  options.max_chars_per_word = files.max_chars_per_word;
  options.special = SpecialTokensInText::keep;
  options.lower_case = true;
  const WordPieceTokenizer uncased(vocab, options);
  options.lower_case = false;
  const WordPieceTokenizer cased(vocab, options);
  std::map<std::string, int> lines_per_reason;
  for (const auto& line : read_lines(std::filesystem::path(POLYHAL_SOURCE_DIR) /
                                     "tests/data/tokenizer/regression.jsonl")) {
    const auto sample = nlohmann::json::parse(line);
    const auto text = sample["text"].get<std::string>();
    const auto& tokenizer = sample["case"] == "uncased" ? uncased : cased;
    std::vector<int> ids;
    for (const auto& token : tokenizer.tokenize(text)) ids.push_back(tokenizer.id(token));
    EXPECT_EQ(ids, sample["fast"].get<std::vector<int>>())
        << sample["case"] << " " << sample["why"] << ": " << sample["text"].dump();
    ++lines_per_reason[sample["case"].get<std::string>() + ", " + sample["why"].get<std::string>()];
  }
  EXPECT_GE(lines_per_reason.size(), 8u) << "each rule in both cases";
  for (const auto& [reason, count] : lines_per_reason)
    std::cout << count << " lines: " << reason << "\n";
}

// The real model's own tokenizer.json (a packaged model's file, not one made
// here), run by the pipeline reader: the uncased regression sample as
// BertTokenizerFast encodes it.
TEST(RealModel, ItsTokenizerJsonEncodesTheRegressionSampleAsBertTokenizerFast) {
  if (!model_present()) return;
  const auto tokenizer = open_tokenizer({kModel / "tokenizer.json", TokenizerOptions{}});
  int lines = 0;
  for (const auto& line : read_lines(std::filesystem::path(POLYHAL_SOURCE_DIR) /
                                     "tests/data/tokenizer/regression.jsonl")) {
    const auto sample = nlohmann::json::parse(line);
    if (sample["case"] != "uncased") continue;
    EXPECT_EQ(tokenizer->ids(sample["text"].get<std::string>()),
              sample["fast"].get<std::vector<std::int32_t>>())
        << sample["why"] << ": " << sample["text"].dump();
    ++lines;
  }
  EXPECT_GE(lines, 20);
}

TEST(RealModel, LastHiddenStatesEqualTheReference) {
  if (!model_present()) return;
  const auto reference = read_safetensors(kData / "reference.safetensors");
  const auto sentences = read_lines(kData / "sentences.txt");
  test::TempDir dir;
  std::size_t count = 0;
  while (reference.count("hidden." + std::to_string(count))) ++count;
  ASSERT_GT(count, 0u);
  std::string first;
  for (std::size_t s = 0; s < count; ++s) first += sentences[s] + "\n";
  const auto lines = infer(dir, dir.write("first.txt", first), "f32", true);
  ASSERT_EQ(lines.size(), count);
  double worst = 0;
  for (std::size_t s = 0; s < count; ++s) {
    const auto& theirs = reference.at("hidden." + std::to_string(s));
    const auto rows = lines[s]["last_hidden_state"];
    ASSERT_EQ(static_cast<std::int64_t>(rows.size()), theirs.shape[0]) << "sentence " << s + 1;
    const auto width = static_cast<std::size_t>(theirs.shape[1]);
    for (std::size_t t = 0; t < rows.size(); ++t) {
      const auto row = rows[t].get<std::vector<float>>();
      for (std::size_t i = 0; i < width; ++i)
        worst =
            std::max(worst, std::fabs(static_cast<double>(row[i]) - theirs.values[t * width + i]));
    }
  }
  std::cout << fmt::format("last hidden states of {} sentences: max abs difference {:.3g}\n", count,
                           worst);
  EXPECT_LE(worst, 1e-4);
}

/// A copy of the fetched model as `name` in `dir`: "no_normalize" without
/// modules.json's Normalize module, "no_pooler" with weights saved without
/// the pooler (make_model_dir_reference.py makes the same two for the library).
std::filesystem::path model_variant(const test::TempDir& dir, const std::string& name) {
  const auto out = dir.path() / name;
  std::filesystem::copy(kModel, out, std::filesystem::copy_options::recursive);
  if (name == "no_normalize") {
    auto modules = nlohmann::json::parse(std::ifstream(out / "modules.json"));
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& module : modules)
      if (module["type"] != "sentence_transformers.models.Normalize") kept.push_back(module);
    std::ofstream(out / "modules.json") << kept.dump(2);
  } else if (name == "no_pooler") {
    auto weights = read_safetensors(out / "model.safetensors");
    std::erase_if(weights,
                  [](const auto& e) { return e.first.find("pooler.") != std::string::npos; });
    write_safetensors(weights, DType::f32, out / "model.safetensors");
  }
  return out;
}

/// Text inference with `model: {dir: MODEL<model_keys>}` and nothing else
/// about the model: the run's output and its JSON lines.
std::pair<test::CommandResult, std::vector<nlohmann::json>> infer_dir(
    const test::TempDir& dir, const std::filesystem::path& model,
    const std::string& model_keys = "") {
  const auto output = dir.path() / (model.filename().string() + ".jsonl");
  const auto config = dir.write(
      "dir.yaml",
      fmt::format("backend: cpu\ntask: inference\nmodel: {{dir: {}{}}}\nbatch: {{micro: "
                  "4}}\ndata: {{source: text, text_file: {}}}\ninference: {{output: {}}}\n",
                  model.string(), model_keys, (kData / "model_dir_lines.txt").string(),
                  output.string()));
  auto r = test::run_polyhal("run --config " + config.string());
  std::vector<nlohmann::json> lines;
  std::ifstream in(output);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return {r, lines};
}

// model.dir reads the directory as sentence-transformers 6.2 does: its
// max_seq_length (256) as the truncation, its pooling and its Normalize
// module or none, weights with or without the pooler (issue 54, items 1-2;
// make_model_dir_reference.py wrote what the library computes).
TEST(RealModel, ModelDirReadsASentenceTransformersDirectoryAsTheLibraryDoes) {
  if (!model_present()) return;
  const auto reference = read_safetensors(kData / "model_dir_reference.safetensors");
  const auto& lengths = reference.at("lengths").values;
  test::TempDir dir;
  for (const std::string form : {"as_shipped", "no_normalize", "no_pooler"}) {
    const auto model = form == "as_shipped" ? kModel : model_variant(dir, form);
    const auto [r, lines] = infer_dir(dir, model);
    ASSERT_EQ(r.exit_code, 0) << form << ": " << r.output;
    const auto& theirs = reference.at("embeddings." + form);
    ASSERT_EQ(static_cast<std::int64_t>(lines.size()), theirs.shape[0]) << form;
    const auto width = static_cast<std::size_t>(theirs.shape[1]);
    double worst = 0, worst_cosine = 1;
    for (std::size_t s = 0; s < lines.size(); ++s) {
      std::size_t real_tokens = 0;
      for (const auto& token : lines[s]["tokens"]) real_tokens += token != "[PAD]";
      EXPECT_EQ(real_tokens, static_cast<std::size_t>(lengths[s])) << form << " line " << s + 1;
      const auto mine = lines[s]["embedding"].get<std::vector<float>>();
      ASSERT_EQ(mine.size(), width);
      for (std::size_t i = 0; i < width; ++i)
        worst =
            std::max(worst, std::fabs(static_cast<double>(mine[i]) - theirs.values[s * width + i]));
      worst_cosine = std::min(worst_cosine, cosine(mine, theirs.values.data() + s * width));
      EXPECT_EQ(lines[s].contains("pooled"), form != "no_pooler") << form;
    }
    std::cout << fmt::format(
        "{}: {} lines of up to 256 tokens: max abs difference {:.3g}, worst "
        "cosine {:.8f}\n",
        form, lines.size(), worst, worst_cosine);
    EXPECT_LE(worst, 1e-4) << form;
    EXPECT_GE(worst_cosine, 0.99999) << form;
    EXPECT_EQ(r.output.find("L2-normalised") != std::string::npos, form != "no_normalize")
        << r.output;
    if (form == "no_pooler") {
      EXPECT_NE(r.output.find("has no pooler"), std::string::npos) << r.output;
    }
  }
  // A seq_len the config gives wins, and the run says what it changes.
  const auto [r, lines] = infer_dir(dir, kModel, ", seq_len: 128");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model.seq_len 128 truncates at 128 tokens where sentence-transformers "
                          "truncates at 256"),
            std::string::npos)
      << r.output;
}

/// The real model's tokenizer as current transformers saves it: tokenizer.json
/// alone. Its pipeline is the one Hugging Face's tokenizers library wrote for
/// the fixture (tests/data/tokenizer_json/make_tokenizer_json.py), with the
/// real vocabulary and its special tokens' ids put in.
void replace_vocab_txt_with_tokenizer_json(const std::filesystem::path& dir) {
  auto pipeline =
      nlohmann::json::parse(std::ifstream(std::filesystem::path(POLYHAL_SOURCE_DIR) /
                                          "tests/data/tokenizer_json/bert_uncased/tokenizer.json"));
  nlohmann::json vocab = nlohmann::json::object();
  std::int32_t id = 0;
  for (const auto& token : read_lines(dir / "vocab.txt")) vocab.emplace(token, id++);
  pipeline["model"]["vocab"] = vocab;
  for (auto& added : pipeline["added_tokens"])
    added["id"] = vocab.at(added["content"].get<std::string>());
  auto& post = pipeline["post_processor"];  // BertProcessing: ["[CLS]", id], ["[SEP]", id]
  for (const char* key : {"cls", "sep"}) post[key][1] = vocab.at(post[key][0].get<std::string>());
  std::ofstream(dir / "tokenizer.json") << pipeline.dump(2);
  std::filesystem::remove(dir / "vocab.txt");
  std::filesystem::remove(dir / "tokenizer_config.json");
}

// The seam of issue 68: a sentence-transformers directory whose tokenizer
// is only a WordPiece tokenizer.json gives the embeddings, bit for bit, and
// the tokens of the same directory with vocab.txt.
TEST(RealModel, ATokenizerJsonAloneGivesTheEmbeddingsOfVocabTxt) {
  if (!model_present()) return;
  test::TempDir dir;
  const auto with_json = dir.path() / "tokenizer_json_only";
  std::filesystem::copy(kModel, with_json, std::filesystem::copy_options::recursive);
  replace_vocab_txt_with_tokenizer_json(with_json);
  ASSERT_FALSE(std::filesystem::exists(with_json / "vocab.txt"));
  const auto [vocab_run, vocab_lines] = infer_dir(dir, kModel);
  ASSERT_EQ(vocab_run.exit_code, 0) << vocab_run.output;
  const auto [json_run, json_lines] = infer_dir(dir, with_json);
  ASSERT_EQ(json_run.exit_code, 0) << json_run.output;
  ASSERT_EQ(json_lines.size(), vocab_lines.size());
  ASSERT_GE(json_lines.size(), 8u);
  for (std::size_t i = 0; i < json_lines.size(); ++i) {
    EXPECT_EQ(json_lines[i]["tokens"], vocab_lines[i]["tokens"]) << "line " << i + 1;
    EXPECT_EQ(json_lines[i]["embedding"], vocab_lines[i]["embedding"]) << "line " << i + 1;
  }
}

// Issue 72, items 5 and 12: a module sentence-transformers applies after
// pooling (LaBSE's Dense, a LayerNorm) was skipped with exit 0; a pooling or
// module file of the wrong shape gave the JSON library's exception. Both
// are config errors naming the file and the module or key.
TEST(RealModel, ADirectorysModulesAreAppliedOrRefusedByName) {
  if (!model_present()) return;
  test::TempDir dir;
  const auto model = dir.path() / "with_dense";
  std::filesystem::copy(kModel, model, std::filesystem::copy_options::recursive);
  auto modules = nlohmann::json::parse(std::ifstream(model / "modules.json"));
  modules.push_back({{"idx", modules.size()},
                     {"name", std::to_string(modules.size())},
                     {"path", "2_Dense"},
                     {"type", "sentence_transformers.models.Dense"}});
  std::ofstream(model / "modules.json") << modules.dump(2);
  auto [r, lines] = infer_dir(dir, model);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find((model / "modules.json").string() + ": module " +
                          std::to_string(modules.size() - 1) +
                          " is sentence_transformers.models.Dense (2_Dense): polyhal applies "
                          "Transformer, Pooling and Normalize only"),
            std::string::npos)
      << r.output;
  // Asked for its own pooling, the run takes the pooled encoder output.
  const auto own =
      dir.write("own.yaml",
                fmt::format("backend: cpu\ntask: inference\nmodel: {{dir: {}}}\nbatch: {{micro: "
                            "4}}\ndata: {{source: text, text_file: {}}}\ninference: {{output: {}, "
                            "pooling: mean, normalize: false}}\n",
                            model.string(), (kData / "model_dir_lines.txt").string(),
                            (dir.path() / "own.jsonl").string()));
  const auto asked = test::run_polyhal("run --config " + own.string());
  EXPECT_EQ(asked.exit_code, 0) << asked.output;
  std::ofstream(model / "1_Pooling" / "config.json") << R"({"pooling_mode_mean_tokens": "yes"})";
  std::tie(r, lines) = infer_dir(dir, model);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find((model / "1_Pooling" / "config.json").string() +
                          ": key 'pooling_mode_mean_tokens': expected true or false, got \"yes\""),
            std::string::npos)
      << r.output;
  std::ofstream(model / "modules.json") << R"({"not": "a list"})";
  std::ofstream(model / "1_Pooling" / "config.json") << R"({"pooling_mode_cls_token": true})";
  std::tie(r, lines) = infer_dir(dir, model);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find((model / "modules.json").string() + ": expected a list of modules"),
            std::string::npos)
      << r.output;
}

// Issue 72, item 13: a sharded directory (model.safetensors.index.json and
// its shards, as save_pretrained writes a model over max_shard_size) gives
// the embeddings of the one-file directory; an index that disagrees with its
// shards is refused naming the index, the shard and the tensor.
TEST(RealModel, AShardedDirectoryReadsAsTheOneFileDirectory) {
  if (!model_present()) return;
  test::TempDir dir;
  const auto sharded = dir.path() / "sharded";
  std::filesystem::copy(kModel, sharded, std::filesystem::copy_options::recursive);
  const TensorMap whole = read_safetensors(sharded / "model.safetensors");
  std::filesystem::remove(sharded / "model.safetensors");
  TensorMap first, second;
  nlohmann::json map = nlohmann::json::object();
  for (const auto& [name, tensor] : whole) {
    const bool early = name.find("layer.") == std::string::npos ||
                       name.find("layer.0.") != std::string::npos ||
                       name.find("layer.1.") != std::string::npos;
    (early ? first : second).emplace(name, tensor);
    map[name] = early ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_safetensors(first, DType::f32, sharded / "model-00001-of-00002.safetensors");
  write_safetensors(second, DType::f32, sharded / "model-00002-of-00002.safetensors");
  const auto write_index = [&](const nlohmann::json& weight_map) {
    std::ofstream(sharded / "model.safetensors.index.json")
        << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2);
  };
  write_index(map);
  const auto [one_run, one_lines] = infer_dir(dir, kModel);
  ASSERT_EQ(one_run.exit_code, 0) << one_run.output;
  const auto [run, lines] = infer_dir(dir, sharded);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(lines.size(), one_lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(lines[i]["embedding"], one_lines[i]["embedding"]) << "line " << i + 1;
  const auto index = (sharded / "model.safetensors.index.json").string();
  const auto refused = [&](const nlohmann::json& weight_map, const std::string& needle) {
    write_index(weight_map);
    const auto [r, ignored] = infer_dir(dir, sharded);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(index + ": "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  };
  auto moved = map;
  moved["embeddings.word_embeddings.weight"] = "model-00002-of-00002.safetensors";
  refused(moved, "tensor 'embeddings.word_embeddings.weight', which the index maps elsewhere");
  auto ghost = map;
  ghost["ghost.weight"] = "model-00001-of-00002.safetensors";
  refused(ghost, "tensor 'ghost.weight' is mapped to");
  auto missing = map;
  missing.erase("pooler.dense.bias");
  refused(missing, "tensor 'pooler.dense.bias', which the index maps elsewhere or not at all");
  auto outside = map;
  outside["pooler.dense.bias"] = "../elsewhere.safetensors";
  refused(outside,
          "key 'weight_map.pooler.dense.bias': '../elsewhere.safetensors' is not a "
          ".safetensors file name beside the index");
}

// Text inference packs its lines into rows (issue 54, item 6): the same
// embeddings and pooled outputs as one line per row, a fraction of the
// tokens computed, and a report that counts lines, not rows.
TEST(RealModel, PackedTextInferenceComputesWhatOneLinePerRowDoes) {
  if (!model_present()) return;
  test::TempDir dir;
  const auto sentences = read_lines(kData / "sentences.txt");
  std::string text;
  for (std::size_t i = 0; i < 300; ++i) text += sentences[i * 4] + "\n";
  for (const auto& line : read_lines(kData / "model_dir_lines.txt")) text += line + "\n";
  const auto lines_file = dir.write("lines.txt", text);
  const auto run = [&](const std::string& name, bool packed) {
    const auto out = dir.path() / (name + ".jsonl");
    const auto config = dir.write(
        name + ".yaml",
        fmt::format(
            "backend: cpu\ntask: inference\nmodel: {{dir: {}}}\nbatch: {{micro: 8}}\n"
            "data: {{source: text, text_file: {}}}\ninference: {{output: {}, packed: {}}}\n",
            kModel.string(), lines_file.string(), out.string(), packed));
    auto r = test::run_polyhal("run --config " + config.string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<nlohmann::json> lines;
    std::ifstream in(out);
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return std::pair{r.output, lines};
  };
  const auto [packed_log, packed] = run("packed", true);
  const auto [padded_log, padded] = run("padded", false);
  ASSERT_EQ(packed.size(), 308u);
  ASSERT_EQ(padded.size(), packed.size());
  double embedding = 0, pooled = 0;
  for (std::size_t i = 0; i < packed.size(); ++i) {
    ASSERT_EQ(packed[i]["index"], i);
    const auto a = packed[i]["embedding"].get<std::vector<float>>();
    const auto b = padded[i]["embedding"].get<std::vector<float>>();
    const auto p = packed[i]["pooled"].get<std::vector<float>>();
    const auto q = padded[i]["pooled"].get<std::vector<float>>();
    for (std::size_t k = 0; k < a.size(); ++k) {
      embedding = std::max(embedding, std::fabs(static_cast<double>(a[k]) - b[k]));
      pooled = std::max(pooled, std::fabs(static_cast<double>(p[k]) - q[k]));
    }
    std::vector<std::string> padded_tokens;
    for (const auto& token : padded[i]["tokens"])
      if (token != "[PAD]") padded_tokens.push_back(token);
    EXPECT_EQ(packed[i]["tokens"].get<std::vector<std::string>>(), padded_tokens) << i;
  }
  std::cout << fmt::format("packed against one line per row: embeddings {:.3g}, pooled {:.3g}\n",
                           embedding, pooled);
  EXPECT_LE(embedding, 1e-5);
  EXPECT_LE(pooled, 1e-5);
  // What each computed, and lines per second over the whole pass.
  const auto computed = [](const std::string& log) {
    const auto at = log.find(" in the lines, ");
    return at == std::string::npos ? -1L : std::stol(log.substr(at + 15));
  };
  EXPECT_GT(computed(padded_log), 4 * computed(packed_log)) << packed_log << padded_log;
  const auto measured = packed_log.find("  measured: ");
  ASSERT_NE(measured, std::string::npos) << packed_log;
  double seconds = 0, per_second = 0;
  ASSERT_EQ(std::sscanf(packed_log.c_str() + measured, "  measured: %*d batches in %lf s: %lf",
                        &seconds, &per_second),
            2)
      << packed_log;
  EXPECT_GT(seconds, 0.0);
  EXPECT_NEAR(per_second, 308.0 / seconds, 0.05 * per_second + 0.1) << packed_log;
}

// model.dir names a model directory, or says what one holds.
TEST(ModelDirectory, ModelDirThatIsNoModelIsRefusedAtTheKey) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "empty");
  const auto config = dir.write("m.yaml", "backend: cpu\ntask: inference\nmodel: {dir: " +
                                              (dir.path() / "empty").string() + "}\n");
  const auto r = test::run_polyhal("validate --config " + config.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("m.yaml:3: key 'model.dir': "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("has no config.json"), std::string::npos) << r.output;
  dir.write(
      "bad/config.json",
      R"({"hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 64, "vocab_size": 10})");
  dir.write("bad/sentence_bert_config.json", R"({"max_seq_length": "long"})");
  dir.write("bad/model.safetensors", "");
  const auto bad = dir.write("b.yaml", "backend: cpu\ntask: inference\nmodel: {dir: " +
                                           (dir.path() / "bad").string() + "}\n");
  const auto r2 = test::run_polyhal("validate --config " + bad.string());
  EXPECT_EQ(r2.exit_code, 2) << r2.output;
  EXPECT_NE(r2.output.find("sentence_bert_config.json: key 'max_seq_length': expected a positive "
                           "integer, got \"long\""),
            std::string::npos)
      << r2.output;
}

// A fine-tuned export is served with its head: model.dir alone sets
// model.head and num_labels from config.json's architectures and id2label
// (issue 55); a hostile id2label is an error naming the file and the key,
// and a num_labels that contradicts it an error at the key.
TEST(ModelDirectory, FineTunedExportBringsItsHeadAndLabels) {
  const auto heads = std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/serve_heads";
  test::TempDir dir;
  const auto validate = [&](const std::string& model, const std::string& extra = "") {
    const auto config = dir.write("h.yaml", "backend: cpu\ntask: inference\nmodel: {dir: " + model +
                                                ", seq_len: 32" + extra + "}\n");
    return test::run_polyhal("validate --config " + config.string());
  };
  auto r = validate((heads / "classifier").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("is a fine-tuned BertForSequenceClassification: model.head "
                          "classification, 3 labels"),
            std::string::npos)
      << r.output;
  r = validate((heads / "question_answering").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("BertForQuestionAnswering: model.head question_answering"),
            std::string::npos)
      << r.output;
  r = validate((heads / "classifier").string(), ", num_labels: 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'model.num_labels': 2, but"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("has 3 labels (id2label)"), std::string::npos) << r.output;
  // An explicit head wins: the classifier's encoder as an embedding model.
  r = validate((heads / "classifier").string(), ", head: none");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("is a fine-tuned"), std::string::npos) << r.output;
  std::string config_json;
  {
    std::ifstream in(heads / "classifier" / "config.json");
    config_json.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const auto& [id2label, complaint] : std::vector<std::pair<std::string, std::string>>{
           {R"({"0": "a", "0": "b", "2": "c"})", "key 'id2label."},
           {R"({"0": "a", "5": "b", "1": "c"})", "key 'id2label.5'"},
           {R"({"-1": "a", "1": "b", "2": "c"})", "key 'id2label.-1'"},
           {R"({"0": 7, "1": "b", "2": "c"})", "key 'id2label.0'"},
           {R"([])", "key 'id2label': expected an object"}}) {
    std::filesystem::copy(heads / "classifier", dir.path() / "hostile",
                          std::filesystem::copy_options::overwrite_existing |
                              std::filesystem::copy_options::recursive);
    auto text = config_json;
    const auto at = text.find("\"id2label\"");
    const auto end = text.find('}', at);
    text.replace(at, end + 1 - at, "\"id2label\": " + id2label);
    dir.write("hostile/config.json", text);
    r = validate((dir.path() / "hostile").string());
    EXPECT_EQ(r.exit_code, 2) << id2label << ": " << r.output;
    EXPECT_NE(r.output.find("config.json: " + complaint), std::string::npos)
        << id2label << ": " << r.output;
  }
}

// A preset over a model directory's weights is one error at the key, read
// from the weights' header before anything loads, naming each dimension
// and the key to set; `validate` says it as `run` would (issue 54, item 5).
TEST(ModelDirectory, WeightsOfAnotherSizeThanThePresetAreNamedBeforeLoading) {
  test::TempDir dir;
  const auto tiny = std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/golden/bert_tiny";
  const auto config =
      dir.write("p.yaml", "backend: cpu\ntask: inference\nmodel:\n  preset: base\n  weights: " +
                              (tiny / "model.safetensors").string() + "\n");
  for (const char* command : {"validate", "run"}) {
    const auto r = test::run_polyhal(std::string(command) + " --config " + config.string());
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.output;
    EXPECT_NE(r.output.find("p.yaml:5: key 'model.weights': "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("holds another model than the run's dimensions (preset base): "
                            "vocab_size 99 (the run's: 30522), hidden_size 32 (the run's: 768), "
                            "num_hidden_layers 2 (the run's: 12), intermediate_size 37 (the "
                            "run's: 3072); set "
                            "model.dir: " +
                            tiny.string()),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("missing tensor"), std::string::npos) << r.output;
  }
  // The key it names is the fix.
  const auto fixed = dir.write(
      "f.yaml", "backend: cpu\ntask: inference\nmodel: {preset: base, seq_len: 32, dir: " +
                    tiny.string() + "}\n");
  const auto r = test::run_polyhal("validate --config " + fixed.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model.preset base is not used"), std::string::npos) << r.output;
}

// A model directory that polyhal cannot read as its authors meant is an
// error naming the file and what to do, never a silent difference.
TEST(ModelDirectory, SettingsPolyhalDoesNotImplementAreRefusedNamingTheFile) {
  test::TempDir dir;
  const auto vocab =
      dir.write("model/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nHello\n");
  const auto text = dir.write("x.txt", "Hello\n");
  const auto run = [&](const std::string& tokenizer_config, const std::string& extra = "") {
    dir.write("model/tokenizer_config.json", tokenizer_config);
    const auto config =
        dir.write("m.yaml",
                  "backend: cpu\ntask: inference\nmodel: {preset: tiny, vocab_size: 7, seq_len: "
                  "8}\ndata: {source: text, text_file: " +
                      text.string() + ", vocab: " + vocab.string() + extra +
                      "}\ninference: {output: " + (dir.path() / "out.jsonl").string() + "}\n");
    return test::run_polyhal("run --config " + config.string());
  };
  const auto refused = [&](const std::string& settings, const std::string& message) {
    const auto r = run(settings);
    EXPECT_EQ(r.exit_code, 2) << settings << ": " << r.output;
    EXPECT_NE(r.output.find("model/tokenizer_config.json: " + message), std::string::npos)
        << r.output;
  };
  refused(R"({"tokenizer_class": "XLMRobertaTokenizer"})",
          "\"tokenizer_class\": XLMRobertaTokenizer is not BERT's WordPiece tokenizer");
  refused(R"({"do_lower_case": false, "strip_accents": true})",
          "\"strip_accents\": true with do_lower_case false");
  refused(R"({"tokenize_chinese_chars": false})", "\"tokenize_chinese_chars\": false");
  refused(R"({"never_split": ["Hello"]})", "\"never_split\": words kept whole");
  refused("{not json", "not valid JSON");
  // A cased model's setting is taken: "Hello" stays "Hello".
  auto r = run(R"({"do_lower_case": false, "tokenizer_class": "BertTokenizer"})");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream out(dir.path() / "out.jsonl");
  std::string line;
  std::getline(out, line);
  EXPECT_NE(line.find("\"Hello\""), std::string::npos) << line;
  // ... unless the config says otherwise, which is logged.
  r = run(R"({"do_lower_case": false})", ", lower_case: true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data.lower_case true overrides"), std::string::npos) << r.output;
  // tokenizer.json: what it says is checked too, and a bad value named.
  const auto refused_pipeline = [&](const std::string& pipeline, const std::string& message) {
    dir.write("model/tokenizer.json", pipeline);
    const auto result = run("{}");
    EXPECT_EQ(result.exit_code, 2) << pipeline << ": " << result.output;
    EXPECT_NE(result.output.find("model/tokenizer.json: " + message), std::string::npos)
        << result.output;
  };
  refused_pipeline(R"({"model": {"type": "BPE"}})", "\"model.type\": BPE is not WordPiece");
  refused_pipeline(R"({"model": {"type": "WordPiece", "max_input_chars_per_word": -1}})",
                   "\"model.max_input_chars_per_word\": -1 is not a whole number");
  refused_pipeline(R"({"model": {"continuing_subword_prefix": "@@"}})",
                   "\"model.continuing_subword_prefix\": \"@@\"");
  refused_pipeline(R"({"normalizer": {"type": "Sequence"}})",
                   "\"normalizer.type\": Sequence is not BertNormalizer");
  refused_pipeline(R"({"normalizer": {"type": "BertNormalizer", "clean_text": false}})",
                   "\"normalizer.clean_text\": false");
  refused_pipeline(R"({"pre_tokenizer": {"type": "Whitespace"}})",
                   "\"pre_tokenizer.type\": Whitespace is not BertPreTokenizer");
  refused_pipeline("[1, 2]", "expected a JSON object");
  std::filesystem::remove(dir.path() / "model/tokenizer.json");
  // A vocabulary larger than the model's embeddings.
  dir.write("model/tokenizer_config.json", "{}");
  const auto big =
      dir.write("b.yaml",
                "backend: cpu\ntask: inference\nmodel: {preset: tiny, vocab_size: 5, seq_len: "
                "8}\ndata: {source: text, text_file: " +
                    text.string() + ", vocab: " + vocab.string() +
                    "}\ninference: {output: " + (dir.path() / "o.jsonl").string() + "}\n");
  r = test::run_polyhal("run --config " + big.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("vocabulary has 7 tokens but the model's vocab_size is 5"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace polyhal
