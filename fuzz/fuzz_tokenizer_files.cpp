// A model directory's tokenizer files: the part before the first NUL byte is
// tokenizer_config.json, the rest tokenizer.json; both are read beside a
// vocab.txt, and a tokenizer is made from what they say; then the
// tokenizer.json is opened alone, its own vocabulary read (open_tokenizer).
#include <algorithm>
#include <string>

#include "fuzz_input.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/app/tokenizer_files.hpp"
#include "polyhal/app/wordpiece_tokenizer.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto cut = std::min(input.find('\0'), input.size());
  const std::string config = input.substr(0, cut);
  const std::string pipeline = cut < input.size() ? input.substr(cut + 1) : std::string();
  static const std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\n##s\n";
  const auto vocab_file = polyhal::fuzz::as_file(
      "vocab.txt", reinterpret_cast<const std::uint8_t*>(vocab.data()), vocab.size());
  polyhal::fuzz::as_file("tokenizer_config.json",
                         reinterpret_cast<const std::uint8_t*>(config.data()), config.size());
  polyhal::fuzz::as_file("tokenizer.json", reinterpret_cast<const std::uint8_t*>(pipeline.data()),
                         pipeline.size());
  try {
    const auto files = polyhal::read_tokenizer_files(vocab_file);
    polyhal::TokenizerOptions options;
    options.lower_case = files.lower_case.value_or(true);
    options.max_chars_per_word = files.max_chars_per_word;
    const polyhal::WordPieceTokenizer tokenizer(vocab_file, options);
    tokenizer.tokenize("Words [MASK] wordswordswordswords");
  } catch (const polyhal::Error&) {
  }
  try {
    const auto alone = polyhal::open_tokenizer({vocab_file.parent_path() / "tokenizer.json", {}});
    const auto encoding = alone->encode("Words [MASK] words", std::string("s"), 8);
    (void)alone->decode(encoding.input_ids);
  } catch (const polyhal::Error&) {
  }
  return 0;
}
