#include "text/pre_tokenizers.hpp"

#include <fmt/format.h>
#include <unicode/uchar.h>

#include <array>
#include <optional>
#include <utility>

#include "polyhal/error.hpp"
#include "text/normalizers.hpp"
#include "text/text_pattern.hpp"

namespace polyhal::text {
namespace {

constexpr std::size_t kMostPreTokenizers = 64;
using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

enum class Behavior : std::uint8_t {
  removed,
  isolated,
  merged_with_previous,
  merged_with_next,
  contiguous
};

Behavior behavior_at(const nlohmann::json& json, const std::string& where, Behavior fallback) {
  const auto it = json.find("behavior");
  if (it == json.end() || it->is_null()) return fallback;
  const std::string name = it->is_string() ? it->get<std::string>() : std::string();
  if (name == "Removed") return Behavior::removed;
  if (name == "Isolated") return Behavior::isolated;
  if (name == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (name == "MergedWithNext") return Behavior::merged_with_next;
  if (name == "Contiguous") return Behavior::contiguous;
  throw ConfigError(
      fmt::format("{}.behavior: expected Removed, Isolated, MergedWithPrevious, "
                  "MergedWithNext or Contiguous",
                  where));
}

std::optional<bool> flag_at(const nlohmann::json& json, const char* key, const std::string& where) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    throw ConfigError(fmt::format("{}.{}: expected true or false", where, key));
  return it->get<bool>();
}

/// tokenizers' NormalizedString::split: `word` cut at `matches` (sorted,
/// not overlapping) as `behavior` says; empty pieces are dropped.
void split_at(const NormalizedText& word, const Ranges& matches, Behavior behavior,
              std::vector<NormalizedText>& out) {
  // Every stretch of the word, marked whether it is a match.
  std::vector<std::pair<std::pair<std::size_t, std::size_t>, bool>> parts;
  std::size_t at = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > at) parts.push_back({{at, begin}, false});
    if (behavior == Behavior::contiguous && !parts.empty() && parts.back().second &&
        parts.back().first.second == begin) {
      parts.back().first.second = end;
    } else {
      parts.push_back({{begin, end}, true});
    }
    at = end;
  }
  if (at < word.size()) parts.push_back({{at, word.size()}, false});
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto [range, is_match] = parts[i];
    switch (behavior) {
      case Behavior::removed:
        if (!is_match) pieces.push_back(range);
        break;
      case Behavior::isolated:
      case Behavior::contiguous:
        pieces.push_back(range);
        break;
      case Behavior::merged_with_previous:
        if (is_match && !pieces.empty() && pieces.back().second == range.first) {
          pieces.back().second = range.second;
        } else {
          pieces.push_back(range);
        }
        break;
      case Behavior::merged_with_next:
        if (is_match && i + 1 < parts.size() && !parts[i + 1].second) {
          parts[i + 1].first.first = range.first;
        } else {
          pieces.push_back(range);
        }
        break;
    }
  }
  for (const auto& [begin, end] : pieces)
    if (end > begin) out.push_back(word.slice(begin, end));
}

/// Each word cut where `is_delimiter` holds, as `behavior` says.
template <class Predicate>
void split_where(std::vector<NormalizedText>& words, Behavior behavior, Predicate is_delimiter) {
  std::vector<NormalizedText> out;
  for (const auto& word : words) {
    Ranges matches;
    for (std::size_t i = 0; i < word.size(); ++i)
      if (is_delimiter(word.chars[i])) matches.emplace_back(i, i + 1);
    split_at(word, matches, behavior, out);
  }
  words = std::move(out);
}

/// tokenizers' prepend() on a word (normalizers.cpp Prepend): the prefix
/// takes the first character's range.
NormalizedText prepended(const NormalizedText& word, std::u32string_view prefix) {
  AlignedBuilder out(word);
  const char32_t first = word.chars.front();
  out.replace_next(prefix.front());
  for (std::size_t i = 1; i < prefix.size(); ++i) out.insert(prefix[i]);
  out.insert(first);
  for (std::size_t i = 1; i < word.size(); ++i) out.keep_next();
  return out.finish();
}

class BertPreTokenizer final : public PreTokenizer {
 public:
  void split(std::vector<NormalizedText>& words) const override {
    split_where(words, Behavior::removed, is_bert_whitespace);
    split_where(words, Behavior::isolated, is_bert_punctuation);
  }
};

class WhitespaceSplit final : public PreTokenizer {
 public:
  void split(std::vector<NormalizedText>& words) const override {
    split_where(words, Behavior::removed, is_unicode_whitespace);
  }
};

class PatternSplit final : public PreTokenizer {
 public:
  PatternSplit(TextPattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void split(std::vector<NormalizedText>& words) const override {
    std::vector<NormalizedText> out;
    for (const auto& word : words) {
      Ranges matches = pattern_.find(word.chars);
      if (invert_) matches = gaps(matches, word.size());
      split_at(word, matches, behavior_, out);
    }
    words = std::move(out);
  }

 private:
  static Ranges gaps(const Ranges& matches, std::size_t size) {
    Ranges out;
    std::size_t at = 0;
    for (const auto& [begin, end] : matches) {
      if (begin > at) out.emplace_back(at, begin);
      at = end;
    }
    if (at < size) out.emplace_back(at, size);
    return out;
  }
  TextPattern pattern_;
  Behavior behavior_;
  bool invert_;
};

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(const nlohmann::json& json, const std::string& where) {
    const auto it = json.find("replacement");
    if (it != json.end()) {
      const std::u32string r = it->is_string() ? from_utf8(it->get<std::string>()) : U"";
      if (r.size() != 1)
        throw ConfigError(fmt::format("{}.replacement: expected one character", where));
      replacement_ = r.front();
    }
    std::string scheme = "always";
    if (const auto s = json.find("prepend_scheme"); s != json.end() && s->is_string()) {
      scheme = s->get<std::string>();
    } else if (const auto legacy = flag_at(json, "add_prefix_space", where)) {
      scheme = *legacy ? "always" : "never";
    }
    if (scheme != "always" && scheme != "first" && scheme != "never")
      throw ConfigError(fmt::format("{}.prepend_scheme: expected always, first or never", where));
    scheme_ = scheme;
    split_ = flag_at(json, "split", where).value_or(true);
  }
  void split(std::vector<NormalizedText>& words) const override {
    std::vector<NormalizedText> out;
    const std::u32string prefix(1, replacement_);
    for (auto word : words) {
      for (char32_t& c : word.chars)
        if (c == ' ') c = replacement_;
      const bool starts = !word.empty() && word.chars.front() == replacement_;
      const bool at_start = !word.empty() && word.origin.front().start == text_start_;
      if (!word.empty() && !starts && (scheme_ == "always" || (scheme_ == "first" && at_start)))
        word = prepended(word, prefix);
      if (!split_) {
        if (!word.empty()) out.push_back(std::move(word));
        continue;
      }
      Ranges matches;
      for (std::size_t i = 0; i < word.size(); ++i)
        if (word.chars[i] == replacement_) matches.emplace_back(i, i + 1);
      split_at(word, matches, Behavior::merged_with_next, out);
    }
    words = std::move(out);
  }
  /// Where the text begins in the original (prepend_scheme first).
  void set_text_start(std::uint32_t start) { text_start_ = start; }

 private:
  char32_t replacement_ = 0x2581;
  std::string scheme_;
  bool split_ = true;
  std::uint32_t text_start_ = 0;
};

/// GPT-2's pre-tokenisation pattern, \s spelled as White_Space (Oniguruma's
/// \s in tokenizers is White_Space; ICU's misses U+000B and U+0085).
constexpr const char* kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(const nlohmann::json& json, const std::string& where)
      : add_prefix_space_(flag_at(json, "add_prefix_space", where).value_or(true)),
        use_regex_(flag_at(json, "use_regex", where).value_or(true)) {
    if (use_regex_) pattern_.emplace(nlohmann::json{{"Regex", kByteLevelPattern}}, where);
  }
  void split(std::vector<NormalizedText>& words) const override {
    std::vector<NormalizedText> cut;
    for (auto word : words) {
      if (add_prefix_space_ && !word.empty() && word.chars.front() != ' ')
        word = prepended(word, U" ");
      if (pattern_) {
        split_at(word, pattern_->find(word.chars), Behavior::isolated, cut);
      } else if (!word.empty()) {
        cut.push_back(std::move(word));
      }
    }
    words.clear();
    for (const auto& word : cut) words.push_back(to_bytes(word));
  }

 private:
  // Each character becomes its UTF-8 bytes' characters, all with its range.
  static NormalizedText to_bytes(const NormalizedText& word) {
    AlignedBuilder out(word);
    std::string bytes;
    for (std::size_t i = 0; i < word.size(); ++i) {
      bytes.clear();
      append_utf8(word.chars[i], bytes);
      out.replace_next(byte_level_char(static_cast<unsigned char>(bytes[0])));
      for (std::size_t b = 1; b < bytes.size(); ++b)
        out.insert(byte_level_char(static_cast<unsigned char>(bytes[b])));
    }
    return out.finish();
  }
  bool add_prefix_space_, use_regex_;
  std::optional<TextPattern> pattern_;
};

class Digits final : public PreTokenizer {
 public:
  Digits(const nlohmann::json& json, const std::string& where)
      : individual_(flag_at(json, "individual_digits", where).value_or(false)) {}
  void split(std::vector<NormalizedText>& words) const override {
    const auto digit = [](char32_t c) { return u_isdigit(static_cast<UChar32>(c)) != 0; };
    split_where(words, individual_ ? Behavior::isolated : Behavior::contiguous, digit);
  }

 private:
  bool individual_;
};

class Punctuation final : public PreTokenizer {
 public:
  Punctuation(const nlohmann::json& json, const std::string& where)
      : behavior_(behavior_at(json, where, Behavior::isolated)) {}
  void split(std::vector<NormalizedText>& words) const override {
    split_where(words, behavior_, is_bert_punctuation);
  }

 private:
  Behavior behavior_;
};

class Sequence final : public PreTokenizer {
 public:
  Sequence(const nlohmann::json& json, const std::string& where) {
    const auto it = json.find("pretokenizers");
    if (it == json.end() || !it->is_array() || it->size() > kMostPreTokenizers)
      throw ConfigError(fmt::format("{}.pretokenizers: expected a list of at most {}", where,
                                    kMostPreTokenizers));
    for (std::size_t i = 0; i < it->size(); ++i)
      if (auto p = make_pre_tokenizer(it->at(i), fmt::format("{}.pretokenizers[{}]", where, i)))
        parts_.push_back(std::move(p));
  }
  void split(std::vector<NormalizedText>& words) const override {
    for (const auto& part : parts_) part->split(words);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

const std::array<char32_t, 256>& byte_chars() {
  static const std::array<char32_t, 256> chars = [] {
    std::array<char32_t, 256> out{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      out[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return out;
  }();
  return chars;
}

}  // namespace

char32_t byte_level_char(unsigned char byte) {
  return byte_chars()[byte];
}

int byte_level_byte(char32_t c) {
  if (c < 256) {
    const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
    return printable ? static_cast<int>(c) : -1;
  }
  for (int b = 0; b < 256; ++b)
    if (byte_chars()[static_cast<std::size_t>(b)] == c) return b;
  return -1;
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& json,
                                                 const std::string& where) {
  if (json.is_null()) return nullptr;
  if (!json.is_object() || !json.contains("type") || !json.at("type").is_string())
    throw ConfigError(fmt::format("{}: expected an object with a \"type\"", where));
  const std::string type = json.at("type").get<std::string>();
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
  if (type == "Whitespace")
    return std::make_unique<PatternSplit>(
        TextPattern(nlohmann::json{{"Regex", R"(\w+|[^\w\s]+)"}}, where), Behavior::removed, true);
  if (type == "Split") {
    if (!json.contains("pattern")) throw ConfigError(fmt::format("{}.pattern: required", where));
    return std::make_unique<PatternSplit>(TextPattern(json.at("pattern"), where + ".pattern"),
                                          behavior_at(json, where, Behavior::isolated),
                                          flag_at(json, "invert", where).value_or(false));
  }
  if (type == "Metaspace") return std::make_unique<Metaspace>(json, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(json, where);
  if (type == "Digits") return std::make_unique<Digits>(json, where);
  if (type == "Punctuation") return std::make_unique<Punctuation>(json, where);
  if (type == "Sequence") return std::make_unique<Sequence>(json, where);
  throw ConfigError(fmt::format(
      "{}.type: {}: not a pre-tokenizer polyhal implements (BertPreTokenizer, Whitespace, "
      "WhitespaceSplit, Metaspace, ByteLevel, Split, Punctuation, Digits, Sequence)",
      where, type));
}

}  // namespace polyhal::text
