#include "text/token_decoders.hpp"

#include <fmt/format.h>

#include <string_view>

#include "polyhal/error.hpp"
#include "text/normalized_text.hpp"
#include "text/pre_tokenizers.hpp"

namespace polyhal::text {
namespace {

constexpr std::size_t kMostDecoders = 16;

std::string text_at(const nlohmann::json& json, const char* key, const char* fallback) {
  const auto it = json.find(key);
  return it != json.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

}  // namespace

void clean_up_tokenization(std::string& text) {
  for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{" .", "."},
                                 {" ?", "?"},
                                 {" !", "!"},
                                 {" ,", ","},
                                 {" ' ", "'"},
                                 {" n't", "n't"},
                                 {" 'm", "'m"},
                                 {" 's", "'s"},
                                 {" 've", "'ve"},
                                 {" 're", "'re"}})
    replace_all(text, from, to);
}

namespace {

/// "<0x41>" -> 0x41, or -1.
int fallback_byte(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return -1;
  int value = 0;
  for (std::size_t i = 3; i < 5; ++i) {
    const char c = token[i];
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

/// Valid UTF-8 of `bytes`, a bad sequence as U+FFFD (Python's "replace").
std::string lossy_utf8(const std::string& bytes) {
  return to_utf8(from_utf8(bytes));
}

void decode_chain(const nlohmann::json& d, std::vector<std::string>& tokens) {
  const std::string type = d.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& part : d.at("decoders")) decode_chain(part, tokens);
  } else if (type == "WordPiece") {
    const std::string prefix = text_at(d, "prefix", "##");
    const bool cleanup = d.value("cleanup", true);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) {
        if (tokens[i].starts_with(prefix)) {
          tokens[i] = tokens[i].substr(prefix.size());
        } else {
          tokens[i] = " " + tokens[i];
        }
      }
      if (cleanup) clean_up_tokenization(tokens[i]);
    }
  } else if (type == "ByteLevel") {
    std::string bytes;
    for (const auto& token : tokens)
      for (const char32_t c : from_utf8(token)) {
        const int b = byte_level_byte(c);
        if (b >= 0) {
          bytes.push_back(static_cast<char>(b));
        } else {
          append_utf8(c, bytes);
        }
      }
    tokens = {lossy_utf8(bytes)};
  } else if (type == "Metaspace") {
    const std::string replacement = text_at(d, "replacement", "\u2581");
    const std::string scheme = text_at(d, "prepend_scheme", "always");
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      replace_all(tokens[i], replacement, " ");
      if (i == 0 && scheme != "never" && tokens[i].starts_with(' ')) tokens[i].erase(0, 1);
    }
  } else if (type == "BPEDecoder") {
    const std::string suffix = text_at(d, "suffix", "</w>");
    for (std::size_t i = 0; i < tokens.size(); ++i)
      replace_all(tokens[i], suffix, i + 1 == tokens.size() ? "" : " ");
  } else if (type == "Replace") {
    const std::string from = d.at("pattern").value("String", "");
    const std::string to = text_at(d, "content", "");
    for (auto& token : tokens) replace_all(token, from, to);
  } else if (type == "ByteFallback") {
    std::vector<std::string> out;
    std::string run;
    const auto flush = [&] {
      if (!run.empty()) out.push_back(lossy_utf8(run));
      run.clear();
    };
    for (const auto& token : tokens) {
      if (const int b = fallback_byte(token); b >= 0) {
        run.push_back(static_cast<char>(b));
      } else {
        flush();
        out.push_back(token);
      }
    }
    flush();
    tokens = std::move(out);
  } else if (type == "Fuse") {
    std::string all;
    for (const auto& token : tokens) all += token;
    tokens = {all};
  } else if (type == "Strip") {
    const std::u32string content = from_utf8(text_at(d, "content", " "));
    const auto start = d.value("start", std::size_t{0}), stop = d.value("stop", std::size_t{0});
    for (auto& token : tokens) {
      std::u32string chars = from_utf8(token);
      std::size_t begin = 0, end = chars.size();
      for (std::size_t n = 0;
           n < start && begin < end && content.size() == 1 && chars[begin] == content[0]; ++n)
        ++begin;
      for (std::size_t n = 0;
           n < stop && end > begin && content.size() == 1 && chars[end - 1] == content[0]; ++n)
        --end;
      token = to_utf8(std::u32string_view(chars).substr(begin, end - begin));
    }
  }
}

}  // namespace

void check_decoder(const nlohmann::json& d, const std::string& where) {
  if (d.is_null()) return;
  if (!d.is_object() || !d.contains("type") || !d.at("type").is_string())
    throw ConfigError(fmt::format("{}: expected an object with a \"type\"", where));
  const std::string type = d.at("type").get<std::string>();
  if (type == "Sequence") {
    const auto it = d.find("decoders");
    if (it == d.end() || !it->is_array() || it->size() > kMostDecoders)
      throw ConfigError(
          fmt::format("{}.decoders: expected a list of at most {}", where, kMostDecoders));
    for (std::size_t i = 0; i < it->size(); ++i)
      check_decoder(it->at(i), fmt::format("{}.decoders[{}]", where, i));
    return;
  }
  if (type == "Replace" &&
      !(d.contains("pattern") && d.at("pattern").is_object() && d.at("pattern").contains("String")))
    throw ConfigError(fmt::format("{}.pattern: a decoder's Replace takes a String pattern", where));
  for (const char* known : {"WordPiece", "ByteLevel", "Metaspace", "BPEDecoder", "Replace",
                            "ByteFallback", "Fuse", "Strip"})
    if (type == known) return;
  throw ConfigError(
      fmt::format("{}.type: {}: not a decoder polyhal implements (WordPiece, ByteLevel, Metaspace, "
                  "BPEDecoder, Replace, ByteFallback, Fuse, Strip, Sequence)",
                  where, type));
}

std::string decode_tokens(const nlohmann::json& decoder, std::vector<std::string> tokens) {
  std::string out;
  if (decoder.is_null()) {
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i > 0 ? " " : "") + tokens[i];
    return out;
  }
  decode_chain(decoder, tokens);
  for (const auto& token : tokens) out += token;
  return out;
}

}  // namespace polyhal::text
