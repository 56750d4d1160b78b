#pragma once
// A tokenizer.json's model, as the tokenizers library runs it on each word
// the pre-tokenizer leaves: WordPiece (greedy longest match), BPE (merges by
// rank, byte fallback, continuing-subword prefix and end-of-word suffix) and
// Unigram (Viterbi over the pieces' scores, unknowns fused, byte fallback).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace polyhal::text {

/// One piece of a word: its id and the characters [begin, end) of the word
/// it covers.
struct WordPiece {
  std::int32_t id = 0;
  std::uint32_t begin = 0, end = 0;
};

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  /// `word`'s pieces, appended to `out`.
  virtual void tokenize(const std::u32string& word, std::vector<WordPiece>& out) const = 0;
  /// The vocabulary, the token of id i at i ("" for an id no token has).
  const std::vector<std::string>& tokens() const noexcept { return tokens_; }
  /// The id of `token`, or -1.
  std::int32_t id_of(const std::string& token) const;
  /// The unknown token's id, or -1 when the model has none.
  std::int32_t unk_id() const noexcept { return unk_; }
  /// WordPiece's continuing-subword prefix ("##"), else "".
  virtual const std::string& continuing_prefix() const;

 protected:
  /// Indexes `tokens_`; ConfigError naming `where` for more than `most`.
  void index(const std::string& where);
  /// byte_fallback: the <0xXX> piece of each byte of `bytes`, or nothing
  /// when the vocabulary lacks one of them.
  std::optional<std::vector<std::int32_t>> byte_pieces(const std::string& bytes) const;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int32_t> ids_;
  std::int32_t unk_ = -1;
};

/// The model `json` describes; `where` names it for errors. Every id is
/// checked to lie in [0, 2^24) and to name one token.
std::unique_ptr<TokenModel> make_token_model(const nlohmann::json& json, const std::string& where);

}  // namespace polyhal::text
