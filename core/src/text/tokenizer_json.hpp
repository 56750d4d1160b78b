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

/// RoBERTa's (or GPT-2's) slow files, `vocab_json` with the merges.txt and
/// tokenizer_config.json beside it, as the tokenizer.json pipeline
/// transformers' RobertaConverter (GPT2Converter for a GPT2Tokenizer) makes
/// of them: byte-level BPE, ByteLevel pre-tokenizer and decoder,
/// RobertaProcessing, the special tokens the vocabulary holds.
nlohmann::json pipeline_of_bpe_files(const std::filesystem::path& vocab_json);

/// XLM-R's slow sentencepiece.bpe.model (the tokenizer_config.json beside
/// it naming XLMRobertaTokenizer, or none) as the pipeline
/// XLMRobertaTokenizerFast converts it to (sentencepiece_model.hpp).
nlohmann::json pipeline_of_sentencepiece(const std::filesystem::path& model_file);

}  // namespace polyhal
