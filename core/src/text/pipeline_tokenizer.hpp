#pragma once
// A Hugging Face tokenizer.json read whole and run as the tokenizers
// library runs it: added and special tokens split out of the raw text, then
// the normaliser, the pre-tokenizer and the model on the text between them,
// the post-processor's template, longest-first truncation, and offsets into
// the original text for every token. Immutable once read: safe from several
// threads at once.
#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "polyhal/app/tokenizer.hpp"
#include "text/normalizers.hpp"
#include "text/post_processors.hpp"
#include "text/pre_tokenizers.hpp"
#include "text/token_models.hpp"

namespace polyhal::text {

/// An added token (tokenizer.json's added_tokens).
struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
  std::size_t index = 0;  ///< its place in the file's list, for errors
  /// What is matched: the content, or (`normalized`) the content as the
  /// normaliser writes it, matched in the normalised text.
  std::u32string pattern;
};

/// The added tokens matched in one form of the text (the raw text, or the
/// normalised text between the raw matches).
struct AddedTokenSet {
  std::vector<AddedToken> tokens;  ///< longest pattern first: leftmost-longest matching
  /// The low bytes of the characters a pattern starts with: the scan skips the rest.
  std::array<bool, 256> starts{};
};

/// One sequence's tokens, without special tokens.
struct SequenceTokens {
  std::vector<std::int32_t> ids;
  std::vector<ByteSpan> offsets;
};

class PipelineTokenizer final : public Tokenizer {
 public:
  /// `pipeline` is the tokenizer.json object read from `file`.
  PipelineTokenizer(const nlohmann::json& pipeline, const std::filesystem::path& file,
                    const TokenizerOptions& options);

  /// `text`'s tokens and their byte offsets, without special tokens.
  SequenceTokens encode_sequence(const std::string& text) const;

  std::vector<std::string> words(const std::string& text) const override;
  std::vector<std::string> tokenize(const std::string& text) const override;
  std::vector<std::int32_t> ids(const std::string& text) const override;
  std::int32_t id(const std::string& token) const override;
  const std::string& token(std::int32_t id) const override;
  std::size_t vocab_size() const noexcept override { return tokens_.size(); }
  bool lower_case() const noexcept override { return lower_case_; }
  const SpecialTokenIds& special_ids() const noexcept override { return special_; }
  bool continues_word(std::int32_t id) const override;
  std::string decode(const std::vector<std::int32_t>& ids) const override;
  PairTruncation pair_truncation() const noexcept override { return PairTruncation::halves; }
  Encoding encode_ids(std::vector<std::int32_t> a, std::optional<std::vector<std::int32_t>> b,
                      std::int64_t max_length, bool* truncated = nullptr) const override;
  Encoding encode(const std::string& text_a, const std::optional<std::string>& text_b,
                  std::int64_t max_length, bool* truncated = nullptr) const override;
  std::vector<Encoding> encode_windows(const std::string& text_a,
                                       const std::optional<std::string>& text_b,
                                       std::int64_t max_length,
                                       const Truncation& truncation) const override;

 private:
  /// The added tokens into the raw and the normalized set.
  void split_added_tokens(std::vector<AddedToken> added);
  /// Normalised text's words (pre-tokenizer) and their tokens (model).
  void encode_normalized(NormalizedText text, SequenceTokens& out,
                         std::vector<std::string>* words) const;
  Encoding frame(SequenceTokens a, std::optional<SequenceTokens> b, std::int64_t max_length,
                 bool* truncated) const;
  void trim_offsets(SequenceTokens& sequence) const;

  std::string source_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<TokenModel> model_;
  PostProcessor post_;
  AddedTokenSet raw_added_;         ///< matched in the raw text
  AddedTokenSet normalized_added_;  ///< matched in the normalised pieces between those
  std::vector<bool> is_special_;    ///< by id: a special added token (decode skips it)
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int32_t> ids_;
  SpecialTokenIds special_;
  bool lower_case_ = false;
  nlohmann::json decoder_;
};

}  // namespace polyhal::text
