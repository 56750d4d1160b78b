#pragma once
// A tokenizer.json's decoder: tokens back to text as the tokenizers
// library's decode_chain does it (WordPiece, ByteLevel, Metaspace,
// BPEDecoder, Replace, ByteFallback, Fuse, Strip, Sequence).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace polyhal::text {

/// ConfigError naming `where` for a decoder that is not implemented or
/// badly formed (checked once, when the file is read).
void check_decoder(const nlohmann::json& decoder, const std::string& where);

/// transformers' clean_up_tokenization: " ." -> ".", " n't" -> "n't", ...
void clean_up_tokenization(std::string& text);

/// `tokens` decoded by `decoder` (null: joined with spaces).
std::string decode_tokens(const nlohmann::json& decoder, std::vector<std::string> tokens);

}  // namespace polyhal::text
