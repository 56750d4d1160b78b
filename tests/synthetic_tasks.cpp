#include "synthetic_tasks.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <vector>

namespace polyhal::test {

std::string synthetic_word(std::mt19937& rng) {
  return fmt::format("w{}", std::uniform_int_distribution<int>(0, kSyntheticWords - 1)(rng));
}

std::filesystem::path write_synthetic_vocab(const TempDir& dir) {
  std::string text = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (int w = 0; w < kSyntheticWords; ++w) text += fmt::format("w{}\n", w);
  for (const char* extra : {"key", "what", "follows", "the", "?", "good", "bad"})
    text += std::string(extra) + "\n";
  return dir.write("vocab.txt", text);
}

std::string squad_json(int questions, const std::string& prefix, unsigned seed) {
  std::mt19937 rng(seed);
  nlohmann::json data = nlohmann::json::array();
  for (int q = 0; q < questions; ++q) {
    std::vector<std::string> words(std::uniform_int_distribution<std::size_t>(6, 16)(rng));
    for (auto& w : words) w = synthetic_word(rng);
    const auto at = std::uniform_int_distribution<std::size_t>(0, words.size() - 1)(rng);
    words.insert(words.begin() + static_cast<std::ptrdiff_t>(at), "key");
    std::string context, answer = words[at + 1];
    std::size_t start = 0;
    for (std::size_t i = 0; i < words.size(); ++i) {
      if (i > 0) context += ' ';
      if (i == at + 1) start = context.size();
      context += words[i];
    }
    data.push_back({{"title", "synthetic"},
                    {"paragraphs",
                     {{{"context", context},
                       {"qas",
                        {{{"id", fmt::format("{}{}", prefix, q)},
                          {"question", "what follows the key ?"},
                          {"answers", {{{"text", answer}, {"answer_start", start}}}}}}}}}}});
  }
  return nlohmann::json{{"version", "1.1"}, {"data", data}}.dump();
}

}  // namespace polyhal::test
