#include "text/text_pattern.hpp"

#include <fmt/format.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include "polyhal/error.hpp"
#include "text/normalized_text.hpp"

namespace polyhal::text {
namespace {

// ICU counts its time limit in steps of about a millisecond: a match that
// takes longer is a pattern backtracking without end on this text.
constexpr std::int32_t kMatchTimeLimit = 200;
constexpr std::size_t kMostPatternBytes = 4096;

}  // namespace

struct TextPattern::Compiled {
  std::unique_ptr<icu::RegexPattern> pattern;
};

TextPattern::TextPattern(const nlohmann::json& json, const std::string& where) : where_(where) {
  const auto text_at = [&](const char* key) -> std::optional<std::string> {
    const auto it = json.find(key);
    if (it == json.end()) return std::nullopt;
    if (!it->is_string() || it->get_ref<const std::string&>().size() > kMostPatternBytes)
      throw ConfigError(fmt::format("{}.{}: expected a string of at most {} bytes", where, key,
                                    kMostPatternBytes));
    return it->get<std::string>();
  };
  if (!json.is_object())
    throw ConfigError(fmt::format("{}: expected {{\"String\": ...}} or {{\"Regex\": ...}}", where));
  if (const auto literal = text_at("String")) {
    literal_ = from_utf8(*literal);
    if (literal_.empty()) throw ConfigError(fmt::format("{}.String: an empty pattern", where));
    return;
  }
  const auto regex = text_at("Regex");
  if (!regex)
    throw ConfigError(fmt::format("{}: expected {{\"String\": ...}} or {{\"Regex\": ...}}", where));
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse{};
  regex_ = std::make_unique<Compiled>();
  regex_->pattern.reset(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(*regex), 0, parse, status));
  if (U_FAILURE(status) || !regex_->pattern)
    throw ConfigError(fmt::format("{}.Regex: not a regular expression ICU reads ({} at offset {})",
                                  where, u_errorName(status), parse.offset));
}

TextPattern::~TextPattern() = default;
TextPattern::TextPattern(TextPattern&&) noexcept = default;
TextPattern& TextPattern::operator=(TextPattern&&) noexcept = default;

std::vector<std::pair<std::size_t, std::size_t>> TextPattern::find(
    const std::u32string& chars) const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  if (!regex_) {
    for (std::size_t at = chars.find(literal_); at != std::u32string::npos;
         at = chars.find(literal_, at + literal_.size()))
      out.emplace_back(at, at + literal_.size());
    return out;
  }
  // ICU matches UTF-16: the index of each code unit's character.
  icu::UnicodeString text;
  std::vector<std::size_t> char_of;
  for (std::size_t i = 0; i < chars.size(); ++i) {
    text.append(static_cast<UChar32>(chars[i]));
    char_of.resize(static_cast<std::size_t>(text.length()), i);
  }
  char_of.push_back(chars.size());
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(regex_->pattern->matcher(text, status));
  if (U_FAILURE(status))
    throw RuntimeFailure(fmt::format("{}: ICU: {}", where_, u_errorName(status)));
  matcher->setTimeLimit(kMatchTimeLimit, status);
  while (matcher->find(status) && U_SUCCESS(status)) {
    const auto begin = static_cast<std::size_t>(matcher->start(status));
    const auto end = static_cast<std::size_t>(matcher->end(status));
    if (end > begin) out.emplace_back(char_of[begin], char_of[end]);
  }
  if (status == U_REGEX_TIME_OUT)
    throw ConfigError(
        fmt::format("{}.Regex: matching took too long on a text of {} characters (a pattern that "
                    "backtracks without end)",
                    where_, chars.size()));
  if (U_FAILURE(status))
    throw RuntimeFailure(fmt::format("{}: ICU: {}", where_, u_errorName(status)));
  return out;
}

}  // namespace polyhal::text
