#include "text/sentencepiece_model.hpp"

#include <fmt/format.h>

#include <cstring>

#include "polyhal/error.hpp"

namespace polyhal::text {
namespace {

// The model's vocabulary limit (docs/hardening.md).
constexpr std::size_t kMostPieces = std::size_t{1} << 24;

/// Protobuf's wire format over a byte range, every read checked.
class Wire {
 public:
  Wire(std::string_view bytes, const std::string& where) : bytes_(bytes), where_(where) {}
  bool done() const { return at_ >= bytes_.size(); }
  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= bytes_.size()) fail("a number runs past the end");
      const auto byte = static_cast<unsigned char>(bytes_[at_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail("a number of more than 10 bytes");
  }
  std::string_view bytes() {
    const std::uint64_t length = varint();
    if (length > bytes_.size() - at_) fail("a field runs past the end");
    const std::string_view out = bytes_.substr(at_, static_cast<std::size_t>(length));
    at_ += static_cast<std::size_t>(length);
    return out;
  }
  float fixed32() {
    if (bytes_.size() - at_ < 4) fail("a number runs past the end");
    std::uint32_t bits = 0;
    for (int i = 0; i < 4; ++i)
      bits |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes_[at_ + i])) << (8 * i);
    at_ += 4;
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
  }
  /// Skips a field of wire type `type`.
  void skip(std::uint64_t type) {
    if (type == 0) {
      (void)varint();
    } else if (type == 1) {
      if (bytes_.size() - at_ < 8) fail("a number runs past the end");
      at_ += 8;
    } else if (type == 2) {
      (void)bytes();
    } else if (type == 5) {
      (void)fixed32();
    } else {
      fail(fmt::format("wire type {} is not protobuf's", type));
    }
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(
        fmt::format("{}: not a SentencePiece model: {} (byte {})", where_, what, at_));
  }

 private:
  std::string_view bytes_;
  std::string where_;
  std::size_t at_ = 0;
};

SentencePieceModel::Piece parse_piece(std::string_view bytes, const std::string& where) {
  SentencePieceModel::Piece piece;
  Wire wire(bytes, where);
  while (!wire.done()) {
    const std::uint64_t key = wire.varint();
    const std::uint64_t field = key >> 3, type = key & 7;
    if (field == 1 && type == 2) {
      piece.text = std::string(wire.bytes());
    } else if (field == 2 && type == 5) {
      piece.score = wire.fixed32();
    } else if (field == 3 && type == 0) {
      piece.type = static_cast<int>(wire.varint() & 0xFF);
    } else {
      wire.skip(type);
    }
  }
  return piece;
}

}  // namespace

SentencePieceModel parse_sentencepiece_model(const std::string& bytes, const std::string& where) {
  SentencePieceModel model;
  Wire wire(bytes, where);
  while (!wire.done()) {
    const std::uint64_t key = wire.varint();
    const std::uint64_t field = key >> 3, type = key & 7;
    if (field == 1 && type == 2) {
      if (model.pieces.size() >= kMostPieces) wire.fail("more pieces than a model holds");
      model.pieces.push_back(parse_piece(wire.bytes(), where));
    } else if (field == 2 && type == 2) {  // TrainerSpec: model_type is field 3
      Wire trainer(wire.bytes(), where);
      while (!trainer.done()) {
        const std::uint64_t k = trainer.varint();
        if ((k >> 3) == 3 && (k & 7) == 0) {
          model.model_type = static_cast<int>(trainer.varint() & 0xFF);
        } else {
          trainer.skip(k & 7);
        }
      }
    } else if (field == 3 && type == 2) {  // NormalizerSpec: precompiled_charsmap is field 2
      Wire normalizer(wire.bytes(), where);
      while (!normalizer.done()) {
        const std::uint64_t k = normalizer.varint();
        if ((k >> 3) == 2 && (k & 7) == 2) {
          model.precompiled_charsmap = std::string(normalizer.bytes());
        } else {
          normalizer.skip(k & 7);
        }
      }
    } else {
      wire.skip(type);
    }
  }
  if (model.pieces.size() < 4) wire.fail("fewer than 4 pieces");
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
