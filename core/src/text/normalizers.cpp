#include "text/normalizers.hpp"

#include <fmt/format.h>
#include <unicode/brkiter.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <optional>
#include <vector>

#include "polyhal/error.hpp"
#include "text/precompiled_charsmap.hpp"
#include "text/text_pattern.hpp"

namespace polyhal::text {
namespace {

constexpr std::size_t kMostNormalizers = 64;

std::optional<bool> flag_at(const nlohmann::json& json, const char* key, const std::string& where) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    throw ConfigError(fmt::format("{}.{}: expected true or false", where, key));
  return it->get<bool>();
}

std::string string_at(const nlohmann::json& json, const char* key, const std::string& where) {
  const auto it = json.find(key);
  if (it == json.end() || !it->is_string())
    throw ConfigError(fmt::format("{}.{}: expected a string", where, key));
  return it->get<std::string>();
}

/// What cleaning removes: Cc and Cf but tab, newline and carriage return,
/// and private-use code points (Co), as both of Hugging Face's BERT
/// tokenizers remove them; NUL and U+FFFD too.
bool is_removed_by_cleaning(char32_t c) {
  if (c == 0 || c == 0xFFFD) return true;
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const auto type = u_charType(static_cast<UChar32>(c));
  return type == U_CONTROL_CHAR || type == U_FORMAT_CHAR || type == U_PRIVATE_USE_CHAR;
}

/// Rust's char::to_lowercase, code point by code point (no final sigma).
void append_lowercase(char32_t c, std::u32string& out) {
  if (c == 0x130) {  // the one unconditional lower case of two code points
    out.push_back('i');
    out.push_back(0x307);
    return;
  }
  out.push_back(static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
}

/// Each input character mapped to zero or more (its first replacing it,
/// the rest inserted after).
template <class Map>
NormalizedText map_each(const NormalizedText& text, Map map) {
  AlignedBuilder out(text);
  std::u32string piece;
  for (std::size_t i = 0; i < text.size(); ++i) {
    piece.clear();
    map(text.chars[i], piece);
    out.replace_run(1, piece);
  }
  return out.finish();
}

const icu::Normalizer2& icu_normalizer(const char* form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  const std::string name = form;
  if (name == "NFC") n = icu::Normalizer2::getNFCInstance(status);
  if (name == "NFD") n = icu::Normalizer2::getNFDInstance(status);
  if (name == "NFKC") n = icu::Normalizer2::getNFKCInstance(status);
  if (name == "NFKD") n = icu::Normalizer2::getNFKDInstance(status);
  if (U_FAILURE(status) || n == nullptr)
    throw RuntimeFailure(fmt::format("ICU has no {} normaliser", form));
  return *n;
}

/// Unicode normalisation with tokenizers' alignments: the text is cut at
/// the normaliser's boundaries and each segment normalised alone; its output
/// replaces its input one for one, extra characters inserted, surplus
/// inputs dropped (a composed character keeps its first input's range).
NormalizedText unicode_normalize(const NormalizedText& text, const icu::Normalizer2& form) {
  AlignedBuilder out(text);
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = begin + 1;
    while (end < text.size() && !form.hasBoundaryBefore(static_cast<UChar32>(text.chars[end])))
      ++end;
    icu::UnicodeString segment;
    for (std::size_t i = begin; i < end; ++i) segment.append(static_cast<UChar32>(text.chars[i]));
    UErrorCode status = U_ZERO_ERROR;
    const icu::UnicodeString normalized = form.normalize(segment, status);
    if (U_FAILURE(status)) throw RuntimeFailure("ICU: normalisation failed");
    std::u32string chars;
    for (int32_t i = 0; i < normalized.length(); i = normalized.moveIndex32(i, 1))
      chars.push_back(static_cast<char32_t>(normalized.char32At(i)));
    out.replace_run(end - begin, chars);
    begin = end;
  }
  return out.finish();
}

template <class Keep>
NormalizedText filter(const NormalizedText& text, Keep keep) {
  AlignedBuilder out(text);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (keep(text.chars[i])) {
      out.keep_next();
    } else {
      out.drop_next();
    }
  }
  return out.finish();
}

class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(const nlohmann::json& json, const std::string& where)
      : clean_(flag_at(json, "clean_text", where).value_or(true)),
        chinese_(flag_at(json, "handle_chinese_chars", where).value_or(true)),
        lowercase_(flag_at(json, "lowercase", where).value_or(true)),
        strip_accents_(flag_at(json, "strip_accents", where).value_or(lowercase_)) {}
  void normalize(NormalizedText& text) const override {
    if (clean_) {
      text = filter(text, [](char32_t c) { return !is_removed_by_cleaning(c); });
      for (char32_t& c : text.chars)
        if (is_bert_whitespace(c)) c = ' ';
    }
    if (chinese_) {
      AlignedBuilder out(text);
      for (std::size_t i = 0; i < text.size(); ++i) {
        if (!is_cjk_ideograph(text.chars[i])) {
          out.keep_next();
          continue;
        }
        out.insert(' ');
        out.keep_next();
        out.insert(' ');
      }
      text = out.finish();
    }
    if (strip_accents_) {
      text = unicode_normalize(text, icu_normalizer("NFD"));
      text = filter(text, [](char32_t c) {
        return u_charType(static_cast<UChar32>(c)) != U_NON_SPACING_MARK;
      });
    }
    if (lowercase_) text = map_each(text, append_lowercase);
  }
  bool lower_cases() const override { return lowercase_; }

 private:
  bool clean_, chinese_, lowercase_, strip_accents_;
};

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(const char* form) : form_(icu_normalizer(form)) {}
  void normalize(NormalizedText& text) const override { text = unicode_normalize(text, form_); }

 private:
  const icu::Normalizer2& form_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(NormalizedText& text) const override { text = map_each(text, append_lowercase); }
  bool lower_cases() const override { return true; }
};

class StripAccents final : public Normalizer {
 public:
  void normalize(NormalizedText& text) const override {
    text = filter(text, [](char32_t c) {
      const auto mask = U_GET_GC_MASK(static_cast<UChar32>(c));
      return (mask & U_GC_M_MASK) == 0;
    });
  }
};

/// SentencePiece's nmt_nfkc rules without the NFKC (tokenizers' Nmt, which
/// SentencePieceUnigramTokenizer and SentencePieceBPETokenizer put before
/// their NFKC): ASCII and C1 control characters removed, the other
/// whitespace and zero-width code points (and U+2581, U+FFFD) made a space.
class Nmt final : public Normalizer {
 public:
  void normalize(NormalizedText& text) const override {
    text = filter(text, [](char32_t c) {
      return !((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
               c == 0x8F || c == 0x9F);
    });
    text = map_each(text, [](char32_t c, std::u32string& out) {
      const bool space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 ||
                         (c >= 0x200B && c <= 0x200F) || c == 0x2028 || c == 0x2029 ||
                         c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
      out.push_back(space ? U' ' : c);
    });
  }
};

class Strip final : public Normalizer {
 public:
  Strip(const nlohmann::json& json, const std::string& where)
      : left_(flag_at(json, "strip_left", where).value_or(true)),
        right_(flag_at(json, "strip_right", where).value_or(true)) {}
  void normalize(NormalizedText& text) const override {
    std::size_t begin = 0, end = text.size();
    if (left_)
      while (begin < end && is_unicode_whitespace(text.chars[begin])) ++begin;
    if (right_)
      while (end > begin && is_unicode_whitespace(text.chars[end - 1])) --end;
    AlignedBuilder out(text);
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (i >= begin && i < end) {
        out.keep_next();
      } else {
        out.drop_next();
      }
    }
    text = out.finish();
  }

 private:
  bool left_, right_;
};

class Replace final : public Normalizer {
 public:
  Replace(const nlohmann::json& json, const std::string& where)
      : pattern_(json.contains("pattern") ? json.at("pattern") : nlohmann::json(),
                 where + ".pattern"),
        content_(from_utf8(string_at(json, "content", where))) {}
  // Each match's characters give way to the content, every character of
  // which takes the range of the match's last character (tokenizers'
  // replace through transform_range, the matched characters removed first).
  void normalize(NormalizedText& text) const override {
    const auto matches = pattern_.find(text.chars);
    if (matches.empty()) return;
    AlignedBuilder out(text);
    std::size_t at = 0;
    for (const auto& [begin, end] : matches) {
      for (; at < begin; ++at) out.keep_next();
      const ByteSpan origin = out.origin_of(end - 1);
      for (; at < end; ++at) out.drop_next();
      out.insert_run(content_, origin);
    }
    for (; at < text.size(); ++at) out.keep_next();
    text = out.finish();
  }

 private:
  TextPattern pattern_;
  std::u32string content_;
};

class Prepend final : public Normalizer {
 public:
  Prepend(const nlohmann::json& json, const std::string& where)
      : prefix_(from_utf8(string_at(json, "prepend", where))) {}
  // tokenizers' prepend(): the prefix's first character replaces the
  // text's first, the rest and that first character are inserted after it,
  // all with the first character's range.
  void normalize(NormalizedText& text) const override {
    if (text.empty() || prefix_.empty()) return;
    AlignedBuilder out(text);
    const char32_t first = text.chars.front();
    out.replace_next(prefix_.front());
    for (std::size_t i = 1; i < prefix_.size(); ++i) out.insert(prefix_[i]);
    out.insert(first);
    for (std::size_t i = 1; i < text.size(); ++i) out.keep_next();
    text = out.finish();
  }

 private:
  std::u32string prefix_;
};

class Precompiled final : public Normalizer {
 public:
  Precompiled(const nlohmann::json& json, const std::string& where) : map_(charsmap(json, where)) {}
  // As tokenizers (and spm_precompiled) apply SentencePiece's map: each
  // extended grapheme cluster of fewer than 6 bytes whole if the map has it,
  // else each of its characters.
  void normalize(NormalizedText& text) const override {
    if (text.empty()) return;
    icu::UnicodeString utf16;
    std::vector<std::size_t> char_of;
    for (std::size_t i = 0; i < text.size(); ++i) {
      utf16.append(static_cast<UChar32>(text.chars[i]));
      char_of.resize(static_cast<std::size_t>(utf16.length()), i);
    }
    char_of.push_back(text.size());
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::BreakIterator> graphemes(
        icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), status));
    if (U_FAILURE(status)) throw RuntimeFailure("ICU: no grapheme iterator");
    graphemes->setText(utf16);
    AlignedBuilder out(text);
    std::int32_t start = graphemes->first();
    for (std::int32_t end = graphemes->next(); end != icu::BreakIterator::DONE;
         start = end, end = graphemes->next()) {
      const std::size_t begin_char = char_of[static_cast<std::size_t>(start)];
      const std::size_t end_char = char_of[static_cast<std::size_t>(end)];
      const std::string cluster =
          to_utf8(std::u32string_view(text.chars).substr(begin_char, end_char - begin_char));
      if (cluster.size() < 6) {
        if (const auto norm = map_.transform(cluster)) {
          out.replace_run(end_char - begin_char, from_utf8(*norm));
          continue;
        }
      }
      for (std::size_t i = begin_char; i < end_char; ++i) {
        std::string one;
        append_utf8(text.chars[i], one);
        if (const auto norm = map_.transform(one)) {
          out.replace_run(1, from_utf8(*norm));
        } else {
          out.keep_next();
        }
      }
    }
    text = out.finish();
  }

 private:
  static PrecompiledCharsmap charsmap(const nlohmann::json& json, const std::string& where) {
    const std::string key = where + ".precompiled_charsmap";
    const auto it = json.find("precompiled_charsmap");
    if (it == json.end() || !it->is_string())
      throw ConfigError(fmt::format("{}: expected the base64 of SentencePiece's map", key));
    auto blob = decode_base64(it->get_ref<const std::string&>());
    if (!blob) throw ConfigError(fmt::format("{}: not base64", key));
    return PrecompiledCharsmap(std::move(*blob), key);
  }
  PrecompiledCharsmap map_;
};

class Sequence final : public Normalizer {
 public:
  Sequence(const nlohmann::json& json, const std::string& where) {
    const auto it = json.find("normalizers");
    if (it == json.end() || !it->is_array() || it->size() > kMostNormalizers)
      throw ConfigError(fmt::format("{}.normalizers: expected a list of at most {} normalizers",
                                    where, kMostNormalizers));
    for (std::size_t i = 0; i < it->size(); ++i)
      if (auto n = make_normalizer(it->at(i), fmt::format("{}.normalizers[{}]", where, i)))
        parts_.push_back(std::move(n));
  }
  void normalize(NormalizedText& text) const override {
    for (const auto& part : parts_) part->normalize(text);
  }
  bool lower_cases() const override {
    for (const auto& part : parts_)
      if (part->lower_cases()) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

bool is_bert_whitespace(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return true;
  return is_unicode_whitespace(c);
}

bool is_unicode_whitespace(char32_t c) {
  return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0;
}

bool is_bert_punctuation(char32_t c) {
  // ASCII symbols count as punctuation even where Unicode says otherwise ("$", "^", "`").
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0;
}

bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& json, const std::string& where) {
  if (json.is_null()) return nullptr;
  if (!json.is_object() || !json.contains("type") || !json.at("type").is_string())
    throw ConfigError(fmt::format("{}: expected an object with a \"type\"", where));
  const std::string type = json.at("type").get<std::string>();
  if (type == "BertNormalizer") return std::make_unique<BertNormalizer>(json, where);
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<UnicodeForm>(type.c_str());
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip") return std::make_unique<Strip>(json, where);
  if (type == "Nmt") return std::make_unique<Nmt>();
  if (type == "Replace") return std::make_unique<Replace>(json, where);
  if (type == "Prepend") return std::make_unique<Prepend>(json, where);
  if (type == "Precompiled") return std::make_unique<Precompiled>(json, where);
  if (type == "Sequence") return std::make_unique<Sequence>(json, where);
  throw ConfigError(fmt::format(
      "{}.type: {}: not a normaliser polyhal implements (BertNormalizer, NFC, NFD, NFKC, NFKD, "
      "Lowercase, StripAccents, Strip, Nmt, Replace, Prepend, Precompiled, Sequence)",
      where, type));
}

}  // namespace polyhal::text
