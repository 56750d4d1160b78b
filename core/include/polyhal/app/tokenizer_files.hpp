#pragma once
/// @file tokenizer_files.hpp
/// The tokenizer settings a Hugging Face model directory ships beside its
/// vocab.txt: tokenizer_config.json (BertTokenizer's arguments) and
/// tokenizer.json (the fast tokenizer's pipeline). A real model then
/// tokenizes as its authors' library does, with no hand editing; a setting
/// polyhal's WordPiece does not implement is an error naming the file and
/// the setting, never a silent difference.
#include <cstddef>
#include <filesystem>
#include <optional>

#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/tokenizer.hpp"

namespace polyhal {

/// What the files beside a vocab.txt say.
struct TokenizerFiles {
  /// do_lower_case from tokenizer_config.json, else tokenizer.json's
  /// normalizer "lowercase" (Hugging Face lets the former win); empty when
  /// neither file says.
  std::optional<bool> lower_case;
  /// tokenizer.json's model.max_input_chars_per_word; else Hugging Face's
  /// 100 when the directory has a tokenizer_config.json (BertTokenizer's
  /// default); else Google's 200 (a vocab.txt alone is Google's layout).
  std::size_t max_chars_per_word = kGoogleMaxCharsPerWord;
  /// A tokenizer.json whose normaliser is not a BertNormalizer: its
  /// casing is its pipeline's own, which data.lower_case cannot change.
  bool casing_fixed = false;
};

/// Reads tokenizer_config.json and tokenizer.json beside `vocab_file` when
/// they exist. Throws ConfigError naming the file and the setting for
/// invalid JSON, an oversized file, or a setting polyhal does not implement
/// (another tokenizer class or model type, strip_accents differing from
/// lower-casing, tokenize_chinese_chars or clean_text false, never_split,
/// another word-piece prefix or unknown token).
TokenizerFiles read_tokenizer_files(const std::filesystem::path& vocab_file);

}  // namespace polyhal
