#pragma once
/// @file tokenizer.hpp
/// BERT's WordPiece tokenizer, following the rules of Google's original
/// tokenization.py (and Hugging Face's BertTokenizer): text cleaning (NUL,
/// U+FFFD and categories Cc/Cf removed), whitespace (incl. U+2028/U+2029)
/// and punctuation splitting, CJK characters as single tokens, optional
/// lower-casing with accent stripping (NFD, marks removed), then greedy
/// longest-match-first WordPiece with "##" continuations (words over
/// max_chars_per_word characters are [UNK]). docs/bert.md, "Tokenizer",
/// lists where Hugging Face's tokenizers differ and why.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// One encoded example, padded to the sequence length.
struct Encoding {
  std::vector<std::string> tokens;  ///< including [CLS], [SEP], [PAD]
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> token_type_ids;
  std::vector<std::int32_t> attention_mask;
};

/// What a literal "[MASK]", "[CLS]", "[SEP]", "[PAD]" or "[UNK]" in the
/// input text becomes. `split`: what BERT's reference tokenization.py does,
/// punctuation splitting making it "[", "mask", "]" (the data the seeds'
/// models were trained on). `keep`: one special token, as Hugging Face's
/// tokenizers do.
enum class SpecialTokensInText : std::uint8_t { split, keep };

/// Google's tokenization.py: a word of more characters is [UNK].
inline constexpr std::size_t kGoogleMaxCharsPerWord = 200;
/// Hugging Face's BertTokenizer and its tokenizer.json default.
inline constexpr std::size_t kHuggingFaceMaxCharsPerWord = 100;

/// How text becomes tokens, besides the vocabulary.
struct TokenizerOptions {
  bool lower_case = true;  ///< lower-case and strip accents
  SpecialTokensInText special = SpecialTokensInText::split;
  std::size_t max_chars_per_word = kGoogleMaxCharsPerWord;
};

class WordPieceTokenizer {
 public:
  /// Reads a vocab.txt (one token per line, id = line number). Throws
  /// ConfigError naming the file if it cannot be read or lacks [CLS], [SEP],
  /// [PAD] or [UNK].
  WordPieceTokenizer(const std::filesystem::path& vocab_file, const TokenizerOptions& options);
  WordPieceTokenizer(const std::filesystem::path& vocab_file, bool lower_case,
                     SpecialTokensInText special = SpecialTokensInText::split)
      : WordPieceTokenizer(vocab_file, TokenizerOptions{lower_case, special}) {}

  /// Text -> basic tokens (before WordPiece).
  std::vector<std::string> basic_tokenize(const std::string& text) const;
  /// Basic tokens -> WordPiece tokens.
  std::vector<std::string> tokenize(const std::string& text) const;
  /// [CLS] a [SEP] (b [SEP]), truncating the longer side first (b on a
  /// tie) to fit `max_length`, then padding with [PAD] (attention_mask 0).
  Encoding encode(const std::string& text_a, const std::optional<std::string>& text_b,
                  std::int64_t max_length) const;

  std::int32_t id(const std::string& token) const;  ///< [UNK]'s id if unknown
  const std::string& token(std::int32_t id) const;
  std::size_t vocab_size() const noexcept { return tokens_.size(); }
  bool lower_case() const noexcept { return options_.lower_case; }

 private:
  /// basic_tokenize on text with no special token to keep.
  void basic_tokenize_segment(const std::string& text, std::vector<std::string>& out) const;
  std::vector<std::string> wordpiece(const std::string& word) const;
  std::map<std::string, std::int32_t> ids_;
  std::vector<std::string> tokens_;
  TokenizerOptions options_;
};

}  // namespace polyhal
