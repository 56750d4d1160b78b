#pragma once
// A tokenizer.json's normaliser, as the tokenizers library applies it:
// BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip,
// Replace, Prepend, Precompiled and a Sequence of them. Each keeps every
// character's range in the original text (normalized_text.hpp).
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "text/normalized_text.hpp"

namespace polyhal::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(NormalizedText& text) const = 0;
  /// Whether it lower-cases (the card's "cased" or "lower-cased").
  virtual bool lower_cases() const { return false; }
};

/// The normaliser `json` describes (null: none, returns nullptr); `where`
/// ("file: \"normalizer\"") names it in errors. ConfigError for a type or
/// setting that is not implemented, or a value of the wrong type.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& json, const std::string& where);

/// Character classes the pipeline shares (tokenizers' definitions).
bool is_bert_whitespace(char32_t c);
bool is_bert_punctuation(char32_t c);
bool is_cjk_ideograph(char32_t c);
bool is_unicode_whitespace(char32_t c);  ///< Rust's char::is_whitespace (White_Space)

}  // namespace polyhal::text
