#pragma once
// SentencePiece's compiled character map (the `precompiled_charsmap` of a
// tokenizer.json's Precompiled normaliser, as XLM-R, CamemBERT and T5 files
// carry it): a little-endian u32 trie size, a darts-clone double-array trie
// over UTF-8 bytes, then the replacement strings, each ending in NUL. No
// library in Debian reads it; this is the lookup, with every index checked.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace polyhal::text {

class PrecompiledCharsmap {
 public:
  /// `blob` is the base64-decoded map; `where` names it for errors
  /// (ConfigError for a map whose sizes or indices do not fit).
  PrecompiledCharsmap(std::string blob, const std::string& where);
  /// The replacement of `chunk`: the value of the shortest prefix of its
  /// bytes the trie holds (as sentencepiece and tokenizers look it up), or
  /// nothing.
  std::optional<std::string_view> transform(std::string_view chunk) const;

 private:
  std::vector<std::uint32_t> units_;
  std::string normalized_;
};

/// RFC 4648 base64 (padding optional, no line breaks); nothing when `text`
/// is not base64.
std::optional<std::string> decode_base64(std::string_view text);

}  // namespace polyhal::text
