// Tokenizes standard input line by line (lines end at "\n" only) and prints
// each line's token ids, space-separated, one output line per input line:
// polyhal's side of the comparison with Hugging Face's tokenizers
// (tests/reference_libraries/compare_tokenizers.py).
//
//   tokenize_lines VOCAB [--lower-case true|false] [--special keep|split]
//
// The tokenizer files beside VOCAB (tokenizer_config.json, tokenizer.json)
// set the options first, as a run reads them; the flags override.
#include <iostream>
#include <string>

#include "polyhal/app/tokenizer_files.hpp"
#include "polyhal/app/wordpiece_tokenizer.hpp"
#include "polyhal/error.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argc % 2 != 0) {
    std::cerr << "usage: tokenize_lines VOCAB [--lower-case true|false] [--special keep|split]\n";
    return 2;
  }
  try {
    const std::filesystem::path vocab = argv[1];
    const auto files = polyhal::read_tokenizer_files(vocab);
    polyhal::TokenizerOptions options;
    options.lower_case = files.lower_case.value_or(true);
    options.max_chars_per_word = files.max_chars_per_word;
    options.special = polyhal::SpecialTokensInText::keep;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string flag = argv[i], value = argv[i + 1];
      if (flag == "--lower-case" && (value == "true" || value == "false")) {
        options.lower_case = value == "true";
      } else if (flag == "--special" && (value == "keep" || value == "split")) {
        options.special = value == "keep" ? polyhal::SpecialTokensInText::keep
                                          : polyhal::SpecialTokensInText::split;
      } else {
        std::cerr << "tokenize_lines: unknown option " << flag << " " << value << "\n";
        return 2;
      }
    }
    const polyhal::WordPieceTokenizer tokenizer(vocab, options);
    std::ios::sync_with_stdio(false);
    std::string out;
    for (std::string line; std::getline(std::cin, line);) {
      out.clear();
      for (const auto& token : tokenizer.tokenize(line)) {
        if (!out.empty()) out += ' ';
        out += std::to_string(tokenizer.id(token));
      }
      std::cout << out << '\n';
    }
    return 0;
  } catch (const polyhal::Error& e) {
    std::cerr << "tokenize_lines: " << e.what() << "\n";
    return 2;
  }
}
