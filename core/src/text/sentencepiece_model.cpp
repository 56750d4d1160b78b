#include "text/sentencepiece_model.hpp"

#include <fmt/format.h>

#include <limits>

#include <proto/sentencepiece_model.pb.h>

#include "polyhal/error.hpp"

namespace polyhal::text {
namespace {

// The model's vocabulary limit (docs/hardening.md).
constexpr int kMostPieces = 1 << 24;

}  // namespace

SentencePieceModel parse_sentencepiece_model(const std::string& bytes, const std::string& where) {
  spmproto::ModelProto proto;
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw ConfigError(
        fmt::format("{}: not a SentencePiece model (its protobuf does not parse)", where));
  if (proto.pieces_size() < 4 || proto.pieces_size() > kMostPieces)
    throw ConfigError(fmt::format("{}: a SentencePiece model of {} pieces: expected 4 to {}", where,
                                  proto.pieces_size(), kMostPieces));
  SentencePieceModel model;
  model.pieces.reserve(static_cast<std::size_t>(proto.pieces_size()));
  for (const auto& piece : proto.pieces())
    model.pieces.push_back({piece.piece(), piece.score(), piece.type()});
  model.model_type = proto.trainer_spec().model_type();
  model.precompiled_charsmap = proto.normalizer_spec().precompiled_charsmap();
  return model;
}

namespace {

std::string base64(const std::string& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::uint32_t bits = 0;
  int count = 0;
  for (const char c : bytes) {
    bits = (bits << 8) | static_cast<unsigned char>(c);
    count += 8;
    while (count >= 6) {
      count -= 6;
      out.push_back(digits[(bits >> count) & 0x3F]);
    }
  }
  if (count > 0) out.push_back(digits[(bits << (6 - count)) & 0x3F]);
  while (out.size() % 4 != 0) out.push_back('=');
  return out;
}

}  // namespace

nlohmann::json xlm_roberta_pipeline(const SentencePieceModel& model, const std::string& where) {
  if (model.model_type != 1)
    throw ConfigError(fmt::format(
        "{}: a SentencePiece model of type {} (not Unigram): save the tokenizer with "
        "transformers (save_pretrained writes a tokenizer.json) and point data.vocab at it",
        where, model.model_type));
  nlohmann::json vocab = nlohmann::json::array();
  for (const char* special : {"<s>", "<pad>", "</s>", "<unk>"}) vocab.push_back({special, 0.0});
  for (std::size_t i = 3; i < model.pieces.size(); ++i)
    vocab.push_back({model.pieces[i].text, model.pieces[i].score});
  vocab.push_back({"<mask>", 0.0});
  nlohmann::json normalizers = nlohmann::json::array();
  if (!model.precompiled_charsmap.empty())
    normalizers.push_back(
        {{"type", "Precompiled"}, {"precompiled_charsmap", base64(model.precompiled_charsmap)}});
  normalizers.push_back({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}});
  normalizers.push_back(
      {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", "\u2581"}});
  const std::size_t mask = vocab.size() - 1;
  nlohmann::json added = nlohmann::json::array();
  const std::pair<const char*, std::size_t> specials[] = {
      {"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}, {"<mask>", mask}};
  for (const auto& [name, id] : specials)
    added.push_back({{"id", id},
                     {"content", name},
                     {"lstrip", std::string(name) == "<mask>"},
                     {"special", true}});
  const auto token = [](const char* id) {
    return nlohmann::json{{"SpecialToken", {{"id", id}, {"type_id", 0}}}};
  };
  const auto sequence = [](const char* id) {
    return nlohmann::json{{"Sequence", {{"id", id}, {"type_id", 0}}}};
  };
  return {
      {"model", {{"type", "Unigram"}, {"unk_id", 3}, {"vocab", vocab}, {"byte_fallback", false}}},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
      {"pre_tokenizer",
       {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}}},
      {"decoder", {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}}},
      {"added_tokens", added},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", nlohmann::json::array({token("<s>"), sequence("A"), token("</s>")})},
        {"pair", nlohmann::json::array({token("<s>"), sequence("A"), token("</s>"), token("</s>"),
                                        sequence("B"), token("</s>")})},
        {"special_tokens",
         {{"<s>", {{"id", "<s>"}, {"ids", {0}}, {"tokens", {"<s>"}}}},
          {"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}}}};
}

}  // namespace polyhal::text
