// Arbitrary UTF-8 (or not) encoded by each kind of loaded tokenizer.json
// (WordPiece, byte-level BPE, Unigram with SentencePiece's Precompiled map:
// tests/data/tokenizer_pipeline): alone, as a pair cut in the middle,
// truncated at 16 tokens, and decoded back.
#include <memory>
#include <string>
#include <vector>

#include "polyhal/app/tokenizer.hpp"
#include "polyhal/error.hpp"

namespace {

const std::vector<std::unique_ptr<polyhal::Tokenizer>>& tokenizers() {
  static const auto loaded = [] {
    std::vector<std::unique_ptr<polyhal::Tokenizer>> out;
    const std::filesystem::path dir =
        std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/tokenizer_pipeline";
    for (const char* kind : {"wordpiece", "bpe_byte_level", "unigram_precompiled"})
      out.push_back(polyhal::open_tokenizer({dir / kind / "tokenizer.json", {}}));
    return out;
  }();
  return loaded;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const auto& tokenizer : tokenizers()) {
    (void)tokenizer->ids(text);
    const auto half = text.size() / 2;
    const auto e = tokenizer->encode(text.substr(0, half), text.substr(half), 16);
    for (std::size_t i = 0; i < e.offsets.size(); ++i)
      if (e.offsets[i].first > e.offsets[i].second || e.offsets[i].second > text.size())
        __builtin_trap();  // an offset outside its text
    (void)tokenizer->decode(e.input_ids);
  }
  return 0;
}
