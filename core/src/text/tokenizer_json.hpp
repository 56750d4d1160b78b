#pragma once
// The vocabulary of a Hugging Face tokenizer.json (the fast tokenizer's
// whole pipeline in one file, which current transformers saves alone, with
// no vocab.txt). Its settings are checked by read_tokenizer_files
// (polyhal/app/tokenizer_files.hpp), as for the file beside a vocab.txt.
#include <filesystem>
#include <string>
#include <vector>

namespace polyhal {

/// model.vocab of `file` as a list, the token of id i at i, with the added
/// tokens past it. Throws ConfigError naming the file and key for a model
/// that is not WordPiece, ids that are not 0..n-1 each once, or more than
/// 2^24 tokens.
std::vector<std::string> read_tokenizer_json_vocabulary(const std::filesystem::path& file);

}  // namespace polyhal
