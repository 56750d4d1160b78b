// Hardening, round 4 (issue 72): each fault the fourth hostile probe found,
// fed as input, with the answer it must give. The live-server items are in
// tests/serve_hardening_test.py. Items not here are not fixed yet.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "polyhal/app/json_input.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/serve_api.hpp"
#include "polyhal/app/squad_data.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// Item 1: 300,000 levels of brackets in any key overflowed an I/O thread's
// stack when the 400 message dumped the value. Every body is read through
// the depth-capped reader, and no message prints more than an excerpt.
TEST(HardeningRound4, DeepBodiesAreRefusedByEveryApiParser) {
  const std::string deep = nested(300000);
  const ApiLimits limits{32, 8};
  struct Case {
    const char* key;
    std::function<void(const std::string&)> parse;
    std::string rest;  ///< the body's other keys, valid
  };
  const std::vector<Case> cases = {
      {"encoding_format", [&](const std::string& b) { parse_openai_embeddings(b, limits); },
       R"("input": "a")"},
      {"dimensions", [&](const std::string& b) { parse_openai_embeddings(b, limits); },
       R"("input": "a")"},
      {"truncation_direction", [&](const std::string& b) { parse_tei_embed(b, limits); },
       R"("inputs": "a")"},
      {"top_k", [&](const std::string& b) { parse_question_answering(b, limits); },
       R"("question": "q", "context": "c")"},
      {"max_answer_length", [&](const std::string& b) { parse_question_answering(b, limits); },
       R"("question": "q", "context": "c")"},
      {"context", [&](const std::string& b) { parse_question_answering(b, limits); },
       R"("question": "q")"},
      {"query", [&](const std::string& b) { parse_tei_rerank(b, limits); }, R"("texts": ["a"])"},
      {"inputs", [&](const std::string& b) { parse_tei_predict(b, limits); }, R"("x": 1)"},
  };
  for (const auto& c : cases) {
    const std::string body = "{" + c.rest + ", \"" + c.key + "\": " + deep + "}";
    const std::string message = test::api_refusal([&] { c.parse(body); });
    EXPECT_NE(message.find("the body: JSON nested deeper than 64 levels"), std::string::npos)
        << c.key << ": " << message;
    // Shallow but wrong: the message quotes a bounded excerpt of the value.
    const std::string wide =
        "{" + c.rest + ", \"" + c.key + "\": [" + std::string(200000, '7') + "]}";
    const std::string wrong = test::api_refusal([&] { c.parse(wide); });
    EXPECT_LT(wrong.size(), 400u) << c.key << ": " << wrong.substr(0, 400);
  }
}

TEST(HardeningRound4, AnExcerptWalksOnlyWhatItPrints) {
  // A value deeper than any reader allows, built in memory: the excerpt
  // stops with its budget instead of recursing 300,000 levels.
  nlohmann::json deep = nlohmann::json::array();
  for (int i = 0; i < 300000; ++i) deep = nlohmann::json::array({std::move(deep)});
  const std::string excerpt = json_excerpt(deep, 20);
  EXPECT_EQ(excerpt, std::string(20, '[') + "...");
  EXPECT_EQ(json_excerpt(nlohmann::json{{"a", 1}, {"b", {true, nullptr}}}),
            R"({"a":1,"b":[true,null]})");
  EXPECT_EQ(json_excerpt(nlohmann::json(std::string(500, 'a')), 10), "\"aaaaaaaaa...");
}

/// A safetensors header of `entries` F32 tensors of one element each.
std::string safetensors_header(int entries) {
  std::string header = "{";
  for (int i = 0; i < entries; ++i)
    header += fmt::format("{}\"t{}\":{{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[{},{}]}}",
                          i == 0 ? "" : ",", i, 4 * i, 4 * i + 4);
  return header + "}";
}

// Item 7: the depth cap made parsing quadratic (nlohmann's callback parser
// rescans the enclosing container after every closed child). The work is
// counted, not timed: each entry costs the same events however many came
// before it, and no more events than the input has bytes.
TEST(HardeningRound4, CappedJsonParsingIsLinearInTheInputsSize) {
  std::vector<std::size_t> per_entry;
  for (const int entries : {1000, 4000, 16000}) {
    const std::string header = safetensors_header(entries);
    JsonReadWork work;
    const auto parsed = parse_json_input(header, "header", &work);
    EXPECT_EQ(parsed.size(), static_cast<std::size_t>(entries));
    EXPECT_LT(work.events, header.size());
    EXPECT_EQ((work.events - 2) % entries, 0u) << work.events;  // the outer object: 2 events
    per_entry.push_back((work.events - 2) / entries);
  }
  EXPECT_EQ(per_entry.front(), per_entry.back());
  EXPECT_EQ(per_entry.front(), per_entry[1]);
}

TEST(HardeningRound4, ALargeSafetensorsHeaderAndASquadFileOfEmptyObjectsReadQuickly) {
  test::TempDir dir;
  // 20,000 entries (1.4 MB of header): 18 to 34 s before, a fraction of a second now.
  const int entries = 20000;
  const std::string header = safetensors_header(entries);
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  file += header + std::string(4 * entries, '\0');
  const auto weights = dir.write("w.safetensors", file);
  EXPECT_EQ(read_safetensors(weights).size(), static_cast<std::size_t>(entries));
  // A SQuAD file of 4 MB of {}s: refused for its shape, after one linear parse.
  std::string squad = "{\"data\": [";
  for (int i = 0; i < 2000000; ++i) squad += i == 0 ? "{}" : ",{}";
  const auto squad_file = dir.write("squad.json", squad + "]}");
  EXPECT_THROW(read_squad_json(squad_file), ConfigError);
}

// Item 15: `--set KEY=null` under a section the config lacks ended with
// yaml-cpp's exception and exit 1; it is the config error, exit 2, naming the key.
TEST(HardeningRound4, UnsettingAKeyOfAMissingSectionIsAConfigError) {
  test::TempDir dir;
  const auto config = dir.write("c.yaml",
                                "backend: cpu\ntask: inference\nmodel: {preset: tiny, seq_len: 16, "
                                "precision: f32}\nbatch: {micro: 2}\n");
  for (const std::string key : {"serve.port", "inference.pooling.deeper", "nothere"}) {
    const auto r =
        test::run_polyhal("validate --config " + config.string() + " --set " + key + "=null");
    EXPECT_EQ(r.exit_code, 2) << key << "\n" << r.output;
    EXPECT_NE(r.output.find("the config does not give " + key + ", so there is nothing to unset"),
              std::string::npos)
        << r.output;
  }
}

// Item 20: a model.seq_len that leaves no room for text after the special
// tokens passed `serve --check`; it is refused naming the key.
TEST(HardeningRound4, ServingNeedsRoomForTextAfterTheSpecialTokens) {
  test::TempDir dir;
  const auto config = dir.write(
      "s.yaml",
      "backend: cpu\ntask: inference\nmodel: {preset: tiny, vocab_size: 85, seq_len: 2, precision: "
      "f32}\ndata: {vocab: " +
          (std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/corpus/vocab.txt").string() +
          "}\ninference: {pooling: mean}\nbatch: {micro: 2}\nserve: {port: 0}\n");
  const auto r = test::run_polyhal("serve " + config.string() + " --check");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'model.seq_len': 2 leaves no room for text after the 2 special "
                          "tokens a request is framed with: serving needs at least 3"),
            std::string::npos)
      << r.output;
  const auto three =
      test::run_polyhal("serve " + config.string() + " --check --set model.seq_len=3");
  EXPECT_EQ(three.exit_code, 0) << three.output;
}

// Item 3: the windows a question makes over its context are counted before
// any feature is built: past the limit the refusal comes with no feature
// made, whatever the context's length.
TEST(HardeningRound4, SquadFeaturesPastTheLimitAreRefusedBeforeTheyAreBuilt) {
  const auto tokenizer =
      open_tokenizer({std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/corpus/vocab.txt",
                      TokenizerOptions{true}});
  SquadFile squad;
  std::string context;
  for (int i = 0; i < 200000; ++i) context += i % 2 ? "river " : "the ";
  squad.contexts.push_back(context);
  squad.questions.push_back({"q", "the river?", {}, false, 0});
  SquadFeatureSettings settings{64, 16, 16, false, 32};
  try {
    make_squad_features(squad, *tokenizer, settings);
    ADD_FAILURE() << "200,000 context tokens in windows of 64 were not refused";
  } catch (const TooManySquadFeatures& e) {
    EXPECT_NE(std::string(e.what()).find("more than 32 windows of 64 tokens"), std::string::npos)
        << e.what();
  }
  settings.max_features = 0;  // no limit: a short context has its windows
  squad.contexts.front() = "the river the river the river";
  EXPECT_EQ(make_squad_features(squad, *tokenizer, settings).features.size(), 1u);
}

// Item 22: raw messages since round 2. A loop of symbolic links in an input
// or model directory said "filesystem error: status: Too many levels of
// symbolic links", exit 1; `prepare-data --input /dev/zero` said "no such
// file or directory". Each names its path and the reason, exit 2.
TEST(HardeningRound4, SymbolicLinkLoopsAndDevicesAreNamedAsSuch) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "in");
  std::filesystem::create_symlink("a", dir.path() / "in" / "b");
  std::filesystem::create_symlink("b", dir.path() / "in" / "a");
  std::filesystem::create_symlink("m2", dir.path() / "m1");
  std::filesystem::create_symlink("m1", dir.path() / "m2");
  const std::string vocab =
      (std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/corpus/vocab.txt").string();
  auto r = test::run_polyhal("prepare-data --input " + (dir.path() / "in").string() + " --vocab " +
                             vocab + " --output " + (dir.path() / "out").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(": --input: a loop of symbolic links (each names the next)"),
            std::string::npos)
      << r.output;
  r = test::run_polyhal("prepare-data --input /dev/zero --vocab " + vocab + " --output " +
                        (dir.path() / "out").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/dev/zero: --input is a device, FIFO or socket"), std::string::npos)
      << r.output;
  const auto config = dir.write(
      "c.yaml", "backend: cpu\ntask: inference\nmodel: {dir: " + (dir.path() / "m1").string() +
                    "}\nbatch: {micro: 2}\n");
  r = test::run_polyhal("validate --config " + config.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find((dir.path() / "m1").string() +
                          ": a loop of symbolic links (each names the next)"),
            std::string::npos)
      << r.output;
}

// Item 9: serve.replicas was not in the plan: `serve --check` loaded one copy
// and said the config fits when N copies do not. The plan counts them all.
TEST(HardeningRound4, ServeCheckPlansEveryReplica) {
  test::TempDir dir;
  const auto config = dir.write(
      "r.yaml",
      "backend: cpu\ntask: inference\nmodel: {preset: large, seq_len: 128, precision: f32}\ndata: "
      "{vocab: " +
          (std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/corpus/vocab.txt").string() +
          "}\ninference: {pooling: mean, packed: false}\nbatch: {micro: 1}\nserve: {port: 0}\n");
  const auto one = test::run_polyhal("serve " + config.string() + " --check");
  EXPECT_EQ(one.exit_code, 0) << one.output;
  const auto many =
      test::run_polyhal("serve " + config.string() + " --check --set serve.replicas=64");
  EXPECT_EQ(many.exit_code, 1) << many.output;
  EXPECT_NE(many.output.find("(64 replicas, serve.replicas), which has"), std::string::npos)
      << many.output;
  EXPECT_NE(many.output.find("it does not fit, and nothing was allocated"), std::string::npos)
      << many.output;
}

// Item 22, the last of round 2's raw messages: an optimizer tensor of the
// wrong size in a checkpoint was named without its file (and reached the
// device as a raw size error). Resuming from it names the checkpoint file,
// the tensor, its size and the model's.
TEST(HardeningRound4, ACheckpointsOptimizerTensorOfTheWrongSizeIsNamedWithItsFile) {
  test::TempDir dir;
  const auto config = dir.write(
      "p.yaml",
      "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, precision: f32}\nbatch: "
      "{micro: 2}\ndata: {source: pattern, max_predictions: 3}\nsteps: 2\ncheckpoint: {dir: " +
          (dir.path() / "ckpt").string() + ", every: 2}\n");
  auto r = test::run_polyhal("run --config " + config.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::filesystem::path file;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "ckpt"))
    if (entry.path().extension() == ".safetensors") file = entry.path();
  ASSERT_FALSE(file.empty());
  TensorMap state = read_safetensors(file);
  const auto metadata = read_safetensors_metadata(file);
  std::string name;
  for (auto& [key, tensor] : state) {
    if (!key.starts_with("optimizer.v.")) continue;
    name = key;
    tensor.values.resize(tensor.values.size() / 2);
    tensor.shape = {static_cast<std::int64_t>(tensor.values.size())};
    break;
  }
  ASSERT_FALSE(name.empty());
  write_safetensors(state, DType::f32, file, metadata);
  r = test::run_polyhal("run --config " + config.string() + " --set steps=4");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(file.string() + ": tensor '" + name + "' holds"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace polyhal
