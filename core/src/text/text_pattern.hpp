#pragma once
// A tokenizer.json pattern ({"String": "..."} or {"Regex": "..."}) as the
// Replace normaliser and the Split pre-tokenizer use it. Regular
// expressions are ICU's (already polyhal's Unicode library: the same
// character properties \p{L}, \p{N} the Oniguruma patterns of tokenizers
// use), each match bounded by ICU's time limit so that a hostile pattern
// cannot make matching super-linear without end: past the limit the text
// is refused with an error naming the file.
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace polyhal::text {

class TextPattern {
 public:
  /// `json` is the pattern object; `where` names it for errors.
  TextPattern(const nlohmann::json& json, const std::string& where);
  ~TextPattern();
  TextPattern(TextPattern&&) noexcept;
  TextPattern& operator=(TextPattern&&) noexcept;

  /// The matches in `chars`, left to right, not overlapping, as character
  /// index ranges [begin, end); an empty match is skipped.
  std::vector<std::pair<std::size_t, std::size_t>> find(const std::u32string& chars) const;

 private:
  std::u32string literal_;
  struct Compiled;
  std::unique_ptr<Compiled> regex_;
  std::string where_;
};

}  // namespace polyhal::text
