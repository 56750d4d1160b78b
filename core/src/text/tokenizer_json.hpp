#pragma once
// The vocabulary of a Hugging Face tokenizer.json (the fast tokenizer's
// whole pipeline in one file, which current transformers saves alone, with
// no vocab.txt). Its settings are checked by read_tokenizer_files
// (polyhal/app/tokenizer_files.hpp), as for the file beside a vocab.txt.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace polyhal {

/// The JSON object of a tokenizer.json, its size capped before it is read.
/// The one place the text layer opens a tokenizer file with
/// read_tokenizer_files (tokenizer_files.cpp).
nlohmann::json read_tokenizer_json_file(const std::filesystem::path& file);

/// model.vocab of the tokenizer.json `pipeline` (read from `file`) as a
/// list, the token of id i at i, with the added tokens past it. Throws
/// ConfigError naming the file and key for a model that is not WordPiece,
/// ids that are not 0..n-1 each once, or more than 2^24 tokens.
std::vector<std::string> tokenizer_json_vocabulary(const nlohmann::json& pipeline,
                                                   const std::filesystem::path& file);

}  // namespace polyhal
