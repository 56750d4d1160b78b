// A vocabulary and text: the part before the first NUL byte is vocab.txt
// (with the special tokens added, so most inputs get past the check), the
// rest is tokenized alone and as a pair, lower-cased and not, special
// tokens split and kept.
#include <algorithm>
#include <string>

#include "fuzz_input.hpp"
#include "polyhal/app/wordpiece_tokenizer.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto cut = std::min(input.find('\0'), input.size());
  const std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n" + input.substr(0, cut);
  const std::string text = cut < input.size() ? input.substr(cut + 1) : input;
  const auto file = polyhal::fuzz::as_file(
      "vocab.txt", reinterpret_cast<const std::uint8_t*>(vocab.data()), vocab.size());
  try {
    for (const bool lower : {true, false}) {
      for (const auto special :
           {polyhal::SpecialTokensInText::split, polyhal::SpecialTokensInText::keep}) {
        const polyhal::WordPieceTokenizer tokenizer(file, lower, special);
        tokenizer.tokenize(text);
        const auto half = text.size() / 2;
        tokenizer.encode(text.substr(0, half), text.substr(half), 32);
      }
    }
  } catch (const polyhal::Error&) {
  }
  return 0;
}
