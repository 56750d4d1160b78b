#pragma once
// A tokenizer.json's pre-tokenizer, as the tokenizers library applies it:
// BertPreTokenizer, Whitespace, WhitespaceSplit, Metaspace, ByteLevel,
// Split, Punctuation, Digits and a Sequence of them. It cuts the normalised
// text into the words the model tokenizes, each keeping its characters'
// ranges in the original text.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/normalized_text.hpp"

namespace polyhal::text {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  /// Replaces `words` by their pieces (empty pieces are dropped).
  virtual void split(std::vector<NormalizedText>& words) const = 0;
};

/// The pre-tokenizer `json` describes (null: none, returns nullptr);
/// `where` names it in errors.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& json,
                                                 const std::string& where);

/// GPT-2's byte-to-character map (every byte a printable character), and back.
char32_t byte_level_char(unsigned char byte);
/// The byte `c` stands for, or -1 for a character outside the map.
int byte_level_byte(char32_t c);

}  // namespace polyhal::text
