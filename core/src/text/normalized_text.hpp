#pragma once
// Text as a tokenizer.json pipeline transforms it, each character keeping
// the byte range of the original text it came from, with the alignment
// rules of the tokenizers library's NormalizedString: a character that
// replaces one keeps that one's range, an inserted character takes the range
// of the input character before it (or an empty range at the start), a
// removed character's range is dropped. Token offsets into the original text come from here.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace polyhal::text {

/// [start, end) in bytes of the original UTF-8 text.
struct ByteSpan {
  std::uint32_t start = 0, end = 0;
};

struct NormalizedText {
  std::u32string chars;
  std::vector<ByteSpan> origin;  ///< one per character of `chars`

  /// `text`'s characters, offsets counted from `base`. Invalid UTF-8
  /// becomes U+FFFD per bad byte, as Python decodes with "replace".
  static NormalizedText from_utf8(std::string_view text, std::uint32_t base = 0);
  std::string utf8() const;
  std::size_t size() const noexcept { return chars.size(); }
  bool empty() const noexcept { return chars.empty(); }
  /// Characters [begin, end) as their own text.
  NormalizedText slice(std::size_t begin, std::size_t end) const;
  /// The original byte range of characters [begin, end) (empty: {0, 0}
  /// unless a position is given).
  ByteSpan span_of(std::size_t begin, std::size_t end) const;
};

/// Builds a NormalizedText character by character with the alignment rules
/// above. Each call consumes input characters of `source` in order.
class AlignedBuilder {
 public:
  explicit AlignedBuilder(const NormalizedText& source) : source_(source) {}
  /// `c` in place of the next input character.
  void replace_next(char32_t c);
  /// `c` inserted: aligned with the input character before it.
  void insert(char32_t c);
  /// Drops the next input character.
  void drop_next();
  /// The next input character unchanged.
  void keep_next();
  /// `replacement` for the next `count` input characters, as the
  /// Precompiled normaliser aligns it: one for one, extra output characters
  /// inserted, surplus inputs dropped.
  void replace_run(std::size_t count, std::u32string_view replacement);
  /// `content`, every character aligned with `origin`.
  void insert_run(std::u32string_view content, ByteSpan origin);
  /// The range of input character `i`.
  ByteSpan origin_of(std::size_t i) const { return source_.origin[i]; }
  std::size_t position() const noexcept { return next_; }
  NormalizedText finish();

 private:
  const NormalizedText& source_;
  std::size_t next_ = 0;
  NormalizedText out_;
};

/// UTF-8 of one code point appended to `out`.
void append_utf8(char32_t c, std::string& out);
std::string to_utf8(std::u32string_view text);
std::u32string from_utf8(std::string_view text);

}  // namespace polyhal::text
