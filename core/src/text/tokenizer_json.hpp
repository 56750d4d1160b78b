#pragma once
// A Hugging Face tokenizer.json (the fast tokenizer's whole pipeline in one
// file, which current transformers saves alone, with no vocab.txt), opened
// once for the pipeline (pipeline_tokenizer.hpp) and the settings check of
// the file beside a vocab.txt (polyhal/app/tokenizer_files.hpp).
#include <filesystem>

#include <nlohmann/json.hpp>

namespace polyhal {

/// The JSON object of a tokenizer.json, its size capped before it is read.
/// The one place the text layer opens a tokenizer file with
/// read_tokenizer_files (tokenizer_files.cpp).
nlohmann::json read_tokenizer_json_file(const std::filesystem::path& file);

}  // namespace polyhal
