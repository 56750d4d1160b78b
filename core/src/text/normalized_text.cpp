#include "text/normalized_text.hpp"

#include <algorithm>

namespace polyhal::text {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

/// The code point at `text[at]` and its length in bytes; a malformed,
/// overlong or surrogate sequence is one byte of U+FFFD.
std::pair<char32_t, std::size_t> decode_at(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return {lead, 1};
  std::size_t length = 0;
  char32_t c = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    c = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    c = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    c = lead & 0x07;
  } else {
    return {kReplacement, 1};
  }
  if (at + length > text.size()) return {kReplacement, 1};
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return {kReplacement, 1};
    c = (c << 6) | (byte(at + i) & 0x3F);
  }
  const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < least[length] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return {kReplacement, 1};
  return {c, length};
}

}  // namespace

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string to_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t c : text) append_utf8(c, out);
  return out;
}

std::u32string from_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto [c, length] = decode_at(text, at);
    out.push_back(c);
    at += length;
  }
  return out;
}

NormalizedText NormalizedText::from_utf8(std::string_view text, std::uint32_t base) {
  NormalizedText out;
  out.chars.reserve(text.size());
  out.origin.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto [c, length] = decode_at(text, at);
    out.chars.push_back(c);
    out.origin.push_back(
        {base + static_cast<std::uint32_t>(at), base + static_cast<std::uint32_t>(at + length)});
    at += length;
  }
  return out;
}

std::string NormalizedText::utf8() const {
  return to_utf8(chars);
}

NormalizedText NormalizedText::slice(std::size_t begin, std::size_t end) const {
  NormalizedText out;
  out.chars.assign(chars.begin() + static_cast<std::ptrdiff_t>(begin),
                   chars.begin() + static_cast<std::ptrdiff_t>(end));
  out.origin.assign(origin.begin() + static_cast<std::ptrdiff_t>(begin),
                    origin.begin() + static_cast<std::ptrdiff_t>(end));
  return out;
}

ByteSpan NormalizedText::span_of(std::size_t begin, std::size_t end) const {
  if (begin >= end || end > origin.size()) return {};
  return {origin[begin].start, origin[end - 1].end};
}

void AlignedBuilder::replace_next(char32_t c) {
  out_.chars.push_back(c);
  out_.origin.push_back(next_ < source_.size() ? source_.origin[next_] : ByteSpan{});
  ++next_;
}

// As tokenizers' transform_range: the range of the input character before
// the insertion point, or an empty range where the text starts.
void AlignedBuilder::insert(char32_t c) {
  out_.chars.push_back(c);
  if (next_ > 0 && next_ <= source_.size()) {
    out_.origin.push_back(source_.origin[next_ - 1]);
  } else {
    const std::uint32_t start = source_.empty() ? 0 : source_.origin.front().start;
    out_.origin.push_back({start, start});
  }
}

void AlignedBuilder::drop_next() {
  ++next_;
}

void AlignedBuilder::keep_next() {
  replace_next(source_.chars[next_]);
}

void AlignedBuilder::replace_run(std::size_t count, std::u32string_view replacement) {
  const std::size_t common = std::min(count, replacement.size());
  for (std::size_t i = 0; i < common; ++i) replace_next(replacement[i]);
  for (std::size_t i = common; i < replacement.size(); ++i) insert(replacement[i]);
  for (std::size_t i = common; i < count; ++i) drop_next();
}

void AlignedBuilder::insert_run(std::u32string_view content, ByteSpan origin) {
  for (const char32_t c : content) {
    out_.chars.push_back(c);
    out_.origin.push_back(origin);
  }
}

NormalizedText AlignedBuilder::finish() {
  return std::move(out_);
}

}  // namespace polyhal::text
