#pragma once
// SentencePiece's model file (sentencepiece.bpe.model, XLM-R's slow
// tokenizer file): its ModelProto's pieces, model type and compiled
// character map, parsed by protobuf (core/proto/sentencepiece_model.proto,
// the fields polyhal needs), and the tokenizer.json pipeline transformers'
// XLMRobertaConverter makes of it.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace polyhal::text {

struct SentencePieceModel {
  struct Piece {
    std::string text;
    float score = 0.0f;
    int type = 1;  ///< 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  };
  std::vector<Piece> pieces;
  int model_type = 1;  ///< 1 Unigram, 2 BPE, 3 word, 4 char
  std::string precompiled_charsmap;
};

/// The model in `bytes` (read from `where`); ConfigError naming it for a
/// malformed message.
SentencePieceModel parse_sentencepiece_model(const std::string& bytes, const std::string& where);

/// XLMRobertaConverter's pipeline of `model`: <s> <pad> </s> <unk>, the
/// pieces after SentencePiece's first three, <mask>; Precompiled, right
/// Strip and runs of spaces as one "▁"; Metaspace; <s> A </s> (</s> B </s>).
nlohmann::json xlm_roberta_pipeline(const SentencePieceModel& model, const std::string& where);

}  // namespace polyhal::text
