#include "polyhal/app/wordpiece_tokenizer.hpp"

#include <fmt/format.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string_view>
#include <utility>

#include "polyhal/error.hpp"
#include "text/token_decoders.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

/// Whitespace as the reference splits on it: its _is_whitespace (space, tab,
/// newline, carriage return, category Zs) and what Python's str.split()
/// then also splits on among the characters cleaning keeps: the line and
/// paragraph separators U+2028 and U+2029 (Zl, Zp).
bool is_whitespace(UChar32 c) {
  const auto type = u_charType(c);
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || type == U_SPACE_SEPARATOR ||
         type == U_LINE_SEPARATOR || type == U_PARAGRAPH_SEPARATOR;
}

/// What cleaning removes: categories Cc and Cf (Google's _is_control), but
/// not tab, newline or carriage return, and private-use code points (Co),
/// which both of Hugging Face's tokenizers remove too. Unassigned code
/// points (Cn) are kept and become [UNK], as in Google's and
/// BertTokenizerFast (BertTokenizer removes them).
bool is_removed(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const auto type = u_charType(c);
  return type == U_CONTROL_CHAR || type == U_FORMAT_CHAR || type == U_PRIVATE_USE_CHAR;
}

bool is_punctuation(UChar32 c) {
  // ASCII symbols count as punctuation even where Unicode says otherwise ("$", "^", "`").
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  const auto type = u_charType(c);
  return type == U_DASH_PUNCTUATION || type == U_START_PUNCTUATION || type == U_END_PUNCTUATION ||
         type == U_CONNECTOR_PUNCTUATION || type == U_OTHER_PUNCTUATION ||
         type == U_INITIAL_PUNCTUATION || type == U_FINAL_PUNCTUATION;
}

bool is_cjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::string to_utf8(const icu::UnicodeString& text) {
  std::string out;
  text.toUTF8String(out);
  return out;
}

/// Lower-cases code point by code point, with no context: both of Hugging
/// Face's tokenizers do so, so a final capital sigma becomes "σ", not the
/// "ς" that Unicode's context-sensitive rule gives. U+0130 (capital I with
/// dot) is the one code point whose lower case is two: "i" and U+0307.
icu::UnicodeString lower_each(const icu::UnicodeString& word) {
  icu::UnicodeString out;
  for (int32_t i = 0; i < word.length(); i = word.moveIndex32(i, 1)) {
    const UChar32 c = word.char32At(i);
    if (c == 0x130) {
      out.append(static_cast<UChar32>('i')).append(static_cast<UChar32>(0x307));
    } else {
      out.append(u_tolower(c));
    }
  }
  return out;
}

icu::UnicodeString lower_and_strip_accents(const icu::UnicodeString& word) {
  const icu::UnicodeString lowered = lower_each(word);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
  if (U_FAILURE(status)) throw RuntimeFailure("ICU: no NFD normaliser");
  const icu::UnicodeString decomposed = nfd->normalize(lowered, status);
  icu::UnicodeString out;
  for (int32_t i = 0; i < decomposed.length(); i = decomposed.moveIndex32(i, 1)) {
    const UChar32 c = decomposed.char32At(i);
    if (u_charType(c) != U_NON_SPACING_MARK) out.append(c);
  }
  return out;
}

constexpr const char* kSpecialTokens[] = {"[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]"};

bool is_special(const std::string& token) {
  return std::find(std::begin(kSpecialTokens), std::end(kSpecialTokens), token) !=
         std::end(kSpecialTokens);
}

}  // namespace

WordPieceTokenizer::WordPieceTokenizer(const std::filesystem::path& vocab_file,
                                       const TokenizerOptions& options)
    : options_(options) {
  // BERT's vocabularies are 0.2-1 MB; 2^24 entries is the model's limit.
  detail::refuse_special_or_oversized_file(vocab_file, std::uintmax_t{64} << 20, "vocabulary");
  std::ifstream in(vocab_file);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the vocabulary", vocab_file.string()));
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n' || line.back() == ' '))
      line.pop_back();
    tokens_.push_back(line);
  }
  index(vocab_file.string());
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> tokens,
                                       const TokenizerOptions& options, const std::string& source)
    : tokens_(std::move(tokens)), options_(options) {
  index(source);
}

void WordPieceTokenizer::index(const std::string& source) {
  for (std::size_t i = 0; i < tokens_.size(); ++i)
    ids_.emplace(tokens_[i], static_cast<std::int32_t>(i));  // a repeated token: the first id
  for (const char* required : {"[CLS]", "[SEP]", "[PAD]", "[UNK]"}) {
    if (!ids_.contains(required))
      throw ConfigError(fmt::format("{}: vocabulary has no {} token", source, required));
  }
  special_.cls = ids_.at("[CLS]");
  special_.sep = ids_.at("[SEP]");
  special_.pad = ids_.at("[PAD]");
  special_.unk = ids_.at("[UNK]");
  if (const auto it = ids_.find("[MASK]"); it != ids_.end()) special_.mask = it->second;
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(const std::string& text) const {
  std::vector<std::string> out;
  if (options_.special == SpecialTokensInText::split) {
    basic_tokenize_segment(text, out);
    return out;
  }
  // Hugging Face's tokenizers find special tokens in the raw text first,
  // anywhere ("x[MASK]." is "x", "[MASK]", "."), and tokenize the text
  // between them on its own.
  std::size_t done = 0;
  for (std::size_t at = text.find('['); at != std::string::npos; at = text.find('[', at + 1)) {
    for (const char* special : kSpecialTokens) {
      if (text.compare(at, std::char_traits<char>::length(special), special) != 0) continue;
      basic_tokenize_segment(text.substr(done, at - done), out);
      out.emplace_back(special);
      done = at + std::char_traits<char>::length(special);
      at = done - 1;
      break;
    }
  }
  basic_tokenize_segment(text.substr(done), out);
  return out;
}

void WordPieceTokenizer::basic_tokenize_segment(const std::string& text,
                                                std::vector<std::string>& out) const {
  const icu::UnicodeString source = icu::UnicodeString::fromUTF8(text);
  // Clean, and put spaces around CJK characters so each becomes a token.
  icu::UnicodeString cleaned;
  for (int32_t i = 0; i < source.length(); i = source.moveIndex32(i, 1)) {
    const UChar32 c = source.char32At(i);
    if (c == 0 || c == 0xFFFD || is_removed(c)) continue;
    if (is_whitespace(c)) {
      cleaned.append(static_cast<UChar>(' '));
    } else if (is_cjk(c)) {
      cleaned.append(static_cast<UChar>(' ')).append(c).append(static_cast<UChar>(' '));
    } else {
      cleaned.append(c);
    }
  }
  int32_t start = 0;
  while (start < cleaned.length()) {
    while (start < cleaned.length() && cleaned.charAt(start) == ' ') ++start;
    int32_t end = start;
    while (end < cleaned.length() && cleaned.charAt(end) != ' ') ++end;
    if (end == start) break;
    icu::UnicodeString word(cleaned, start, end - start);
    start = end;
    if (options_.lower_case) word = lower_and_strip_accents(word);
    icu::UnicodeString current;
    for (int32_t i = 0; i < word.length(); i = word.moveIndex32(i, 1)) {
      const UChar32 c = word.char32At(i);
      if (is_punctuation(c)) {
        if (!current.isEmpty()) out.push_back(to_utf8(current));
        current.remove();
        out.push_back(to_utf8(icu::UnicodeString(c)));
      } else {
        current.append(c);
      }
    }
    if (!current.isEmpty()) out.push_back(to_utf8(current));
  }
}

std::vector<std::string> WordPieceTokenizer::wordpiece(const std::string& word) const {
  const icu::UnicodeString chars = icu::UnicodeString::fromUTF8(word);
  if (static_cast<std::size_t>(chars.countChar32()) > options_.max_chars_per_word) return {"[UNK]"};
  std::vector<std::string> pieces;
  int32_t start = 0;
  while (start < chars.length()) {
    int32_t end = chars.length();
    std::string found;
    while (start < end) {
      std::string piece = to_utf8(icu::UnicodeString(chars, start, end - start));
      if (start > 0) piece = "##" + piece;
      if (ids_.contains(piece)) {
        found = piece;
        break;
      }
      end = chars.moveIndex32(end, -1);
    }
    if (found.empty()) return {"[UNK]"};  // one unknown piece makes the whole word unknown
    pieces.push_back(found);
    start = end;
  }
  return pieces;
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (const auto& word : basic_tokenize(text)) {
    if (options_.special == SpecialTokensInText::keep && is_special(word) && ids_.contains(word)) {
      out.push_back(word);
      continue;
    }
    for (auto& piece : wordpiece(word)) out.push_back(std::move(piece));
  }
  return out;
}

std::int32_t WordPieceTokenizer::id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? special_.unk : it->second;
}

bool WordPieceTokenizer::continues_word(std::int32_t id) const {
  return token(id).starts_with("##");
}

std::string WordPieceTokenizer::decode(const std::vector<std::int32_t>& ids) const {
  // BertTokenizer's decode: special tokens skipped, pieces joined with
  // spaces and "##" glued, then clean_up_tokenization_spaces.
  std::string text;
  for (const std::int32_t i : ids) {
    const std::string& piece = token(i);
    if (is_special(piece) && ids_.contains(piece)) continue;
    if (piece.starts_with("##")) {
      text += piece.substr(2);
    } else {
      if (!text.empty()) text += ' ';
      text += piece;
    }
  }
  text::clean_up_tokenization(text);
  return text;
}

const std::string& WordPieceTokenizer::token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size())
    throw RuntimeFailure(fmt::format("token id {} outside the vocabulary", id));
  return tokens_[static_cast<std::size_t>(id)];
}

}  // namespace polyhal
