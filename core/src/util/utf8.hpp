#pragma once
// UTF-8 as the reference Python scripts see text: code points. Bytes that do
// not start a complete, well-formed sequence decode as themselves, one at a
// time, so untrusted text never stops a reader.
#include <cstddef>
#include <string>

namespace polyhal::utf8 {

/// Decodes the code point at byte `i` and advances `i` past it.
inline char32_t next(const std::string& text, std::size_t& i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const std::size_t extra = lead < 0x80             ? 0
                            : (lead & 0xE0) == 0xC0 ? 1
                            : (lead & 0xF0) == 0xE0 ? 2
                            : (lead & 0xF8) == 0xF0 ? 3
                                                    : 0;
  bool complete = extra > 0 && i + extra < text.size();
  for (std::size_t k = 1; complete && k <= extra; ++k)
    complete = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
  if (!complete) {
    ++i;
    return lead;
  }
  char32_t c = lead & (0x7F >> (extra + 1));
  for (std::size_t k = 1; k <= extra; ++k)
    c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  i += extra + 1;
  return c;
}

/// The code points of `text`.
inline std::u32string decode(const std::string& text) {
  std::u32string out;
  for (std::size_t i = 0; i < text.size();) out.push_back(next(text, i));
  return out;
}

/// Code points back to UTF-8.
inline std::string encode(const std::u32string& text) {
  std::string out;
  for (char32_t c : text) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

}  // namespace polyhal::utf8
