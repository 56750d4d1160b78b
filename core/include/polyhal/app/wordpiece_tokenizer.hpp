#pragma once
/// @file wordpiece_tokenizer.hpp
/// BERT's WordPiece tokenizer, following the rules of Google's original
/// tokenization.py (and Hugging Face's BertTokenizer): text cleaning (NUL,
/// U+FFFD and categories Cc/Cf removed), whitespace (incl. U+2028/U+2029)
/// and punctuation splitting, CJK characters as single tokens, optional
/// lower-casing with accent stripping (NFD, marks removed), then greedy
/// longest-match-first WordPiece with "##" continuations (words over
/// max_chars_per_word characters are [UNK]). docs/bert.md, "Tokenizer",
/// lists where Hugging Face's tokenizers differ and why. Named only by the
/// text layer and its tests: everything else holds a Tokenizer.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/tokenizer.hpp"

namespace polyhal {

class WordPieceTokenizer final : public Tokenizer {
 public:
  /// Reads a vocab.txt (one token per line, id = line number). Throws
  /// ConfigError naming the file if it cannot be read or lacks [CLS], [SEP],
  /// [PAD] or [UNK].
  WordPieceTokenizer(const std::filesystem::path& vocab_file, const TokenizerOptions& options);
  WordPieceTokenizer(const std::filesystem::path& vocab_file, bool lower_case,
                     SpecialTokensInText special = SpecialTokensInText::split)
      : WordPieceTokenizer(vocab_file, TokenizerOptions{lower_case, special}) {}
  /// The vocabulary as a list (id = index), read from `source` (named in errors).
  WordPieceTokenizer(std::vector<std::string> tokens, const TokenizerOptions& options,
                     const std::string& source);

  /// Text -> basic tokens (before WordPiece).
  std::vector<std::string> basic_tokenize(const std::string& text) const;
  std::vector<std::string> words(const std::string& text) const override {
    return basic_tokenize(text);
  }
  /// Basic tokens -> WordPiece tokens.
  std::vector<std::string> tokenize(const std::string& text) const override;

  std::int32_t id(const std::string& token) const override;  ///< [UNK]'s id if unknown
  const std::string& token(std::int32_t id) const override;
  std::size_t vocab_size() const noexcept override { return tokens_.size(); }
  bool lower_case() const noexcept override { return options_.lower_case; }
  const SpecialTokenIds& special_ids() const noexcept override { return special_; }
  bool continues_word(std::int32_t id) const override;
  std::string decode(const std::vector<std::int32_t>& ids) const override;
  PairTruncation pair_truncation() const noexcept override { return options_.pair_truncation; }

 private:
  /// Indexes tokens_ and checks the special tokens, naming `source`.
  void index(const std::string& source);
  /// basic_tokenize on text with no special token to keep.
  void basic_tokenize_segment(const std::string& text, std::vector<std::string>& out) const;
  std::vector<std::string> wordpiece(const std::string& word) const;
  std::map<std::string, std::int32_t> ids_;
  std::vector<std::string> tokens_;
  TokenizerOptions options_;
  SpecialTokenIds special_;
};

}  // namespace polyhal
