#pragma once
// UTF-8 as the reference Python scripts see text: code points. Bytes that do
// not start a complete, well-formed sequence decode as themselves, one at a
// time, so untrusted text never stops a reader.
#include <algorithm>
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

/// Replaces each byte sequence that is not well-formed UTF-8 (a stray or
/// missing continuation byte, an overlong form, a surrogate, a code point
/// past U+10FFFF) with U+FFFD, one per maximal ill-formed part, as Python's
/// decode(errors="replace") does. Returns how many were replaced.
inline std::size_t repair(std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && static_cast<unsigned char>(text[i]) < 0x80) ++i;
  if (i == text.size()) return 0;  // ASCII: nothing to check
  std::string out(text, 0, i);
  std::size_t replaced = 0;
  const auto byte = [&](std::size_t at) { return static_cast<unsigned char>(text[at]); };
  while (i < text.size()) {
    const unsigned char lead = byte(i);
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the second byte's range (Unicode table 3-7)
    if (lead < 0x80) {
      length = 1;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    }
    std::size_t good = length == 0 ? 0 : 1;  // bytes of a well-formed prefix
    while (good > 0 && good < length && i + good < text.size()) {
      const unsigned char c = byte(i + good);
      const bool fits = good == 1 ? (c >= low && c <= high) : (c >= 0x80 && c <= 0xBF);
      if (!fits) break;
      ++good;
    }
    if (length > 0 && good == length) {
      out.append(text, i, length);
      i += length;
      continue;
    }
    out += "\xEF\xBF\xBD";  // U+FFFD
    ++replaced;
    i += std::max<std::size_t>(good, 1);
  }
  text = std::move(out);
  return replaced;
}

}  // namespace polyhal::utf8
