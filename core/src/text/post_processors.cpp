#include "text/post_processors.hpp"

#include <fmt/format.h>

#include "polyhal/error.hpp"

namespace polyhal::text {
namespace {

constexpr std::size_t kMostTemplateItems = 64;
constexpr std::size_t kMostProcessors = 16;

std::int32_t checked_id(const nlohmann::json& id, std::size_t vocab_size,
                        const std::string& where) {
  if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
      id.get<std::int64_t>() >= static_cast<std::int64_t>(vocab_size))
    throw ConfigError(fmt::format("{}: expected a token id below {}, got {}", where, vocab_size,
                                  id.dump().substr(0, 40)));
  return id.get<std::int32_t>();
}

/// ["[CLS]", 101]: the token's id.
std::int32_t pair_id(const nlohmann::json& json, const char* key, std::size_t vocab_size,
                     const std::string& where) {
  const auto it = json.find(key);
  if (it == json.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string())
    throw ConfigError(fmt::format("{}.{}: expected [token, id]", where, key));
  return checked_id((*it)[1], vocab_size, fmt::format("{}.{}", where, key));
}

bool flag(const nlohmann::json& json, const char* key, bool fallback) {
  const auto it = json.find(key);
  return it != json.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::vector<TemplateItem> template_items(const nlohmann::json& json, const char* key,
                                         const nlohmann::json& specials, std::size_t vocab_size,
                                         const std::string& where) {
  const std::string at = fmt::format("{}.{}", where, key);
  const auto it = json.find(key);
  if (it == json.end() || !it->is_array() || it->size() > kMostTemplateItems)
    throw ConfigError(
        fmt::format("{}: expected a list of at most {} items", at, kMostTemplateItems));
  std::vector<TemplateItem> items;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& item = it->at(i);
    const std::string here = fmt::format("{}[{}]", at, i);
    TemplateItem out;
    const auto field = [&](const char* kind) -> const nlohmann::json* {
      const auto f = item.find(kind);
      return f == item.end() || !f->is_object() ? nullptr : &*f;
    };
    if (const auto* sequence = field("Sequence")) {
      const auto id = sequence->find("id");
      if (id == sequence->end() || !id->is_string() || (*id != "A" && *id != "B"))
        throw ConfigError(fmt::format("{}.Sequence.id: expected \"A\" or \"B\"", here));
      out.sequence = *id == "A" ? 0 : 1;
    } else if (const auto* special = field("SpecialToken")) {
      const auto id = special->find("id");
      if (id == special->end() || !id->is_string() || !specials.is_object() ||
          !specials.contains(id->get<std::string>()))
        throw ConfigError(
            fmt::format("{}.SpecialToken.id: expected a token named in special_tokens", here));
      const auto& entry = specials.at(id->get<std::string>());
      const auto ids = entry.find("ids");
      if (ids == entry.end() || !ids->is_array() || ids->empty() ||
          ids->size() > kMostTemplateItems)
        throw ConfigError(fmt::format("{}: special token {}: expected its ids", here, id->dump()));
      for (const auto& one : *ids) out.special_ids.push_back(checked_id(one, vocab_size, here));
    } else {
      throw ConfigError(
          fmt::format("{}: expected {{\"Sequence\": ...}} or {{\"SpecialToken\": ...}}", here));
    }
    const auto* body = field(out.sequence >= 0 ? "Sequence" : "SpecialToken");
    if (const auto type = body->find("type_id"); type != body->end()) {
      if (!type->is_number_integer() || type->get<std::int64_t>() < 0 ||
          type->get<std::int64_t>() > 255)
        throw ConfigError(fmt::format("{}.type_id: expected 0 to 255", here));
      out.type_id = type->get<std::int32_t>();
    }
    items.push_back(std::move(out));
  }
  return items;
}

void read_into(const nlohmann::json& json, const std::string& where, std::size_t vocab_size,
               PostProcessor& out, std::size_t depth) {
  if (!json.is_object() || !json.contains("type") || !json.at("type").is_string())
    throw ConfigError(fmt::format("{}: expected an object with a \"type\"", where));
  const std::string type = json.at("type").get<std::string>();
  if (type == "BertProcessing") {
    const std::int32_t cls = pair_id(json, "cls", vocab_size, where);
    const std::int32_t sep = pair_id(json, "sep", vocab_size, where);
    out.single = {{{cls}, -1, 0}, {{}, 0, 0}, {{sep}, -1, 0}};
    out.pair = {{{cls}, -1, 0}, {{}, 0, 0}, {{sep}, -1, 0}, {{}, 1, 1}, {{sep}, -1, 1}};
  } else if (type == "RobertaProcessing") {
    const std::int32_t cls = pair_id(json, "cls", vocab_size, where);
    const std::int32_t sep = pair_id(json, "sep", vocab_size, where);
    out.single = {{{cls}, -1, 0}, {{}, 0, 0}, {{sep}, -1, 0}};
    out.pair = {{{cls}, -1, 0}, {{}, 0, 0}, {{sep}, -1, 0},
                {{sep}, -1, 0}, {{}, 1, 0}, {{sep}, -1, 0}};
    out.trim_offsets = flag(json, "trim_offsets", true);
    out.add_prefix_space = flag(json, "add_prefix_space", true);
  } else if (type == "TemplateProcessing") {
    const nlohmann::json specials = json.value("special_tokens", nlohmann::json::object());
    out.single = template_items(json, "single", specials, vocab_size, where);
    out.pair = template_items(json, "pair", specials, vocab_size, where);
  } else if (type == "ByteLevel") {
    out.trim_offsets = flag(json, "trim_offsets", true);
    out.add_prefix_space = flag(json, "add_prefix_space", true);
  } else if (type == "Sequence") {
    const auto it = json.find("processors");
    if (it == json.end() || !it->is_array() || it->size() > kMostProcessors || depth > 4)
      throw ConfigError(
          fmt::format("{}.processors: expected a list of at most {}", where, kMostProcessors));
    for (std::size_t i = 0; i < it->size(); ++i)
      read_into(it->at(i), fmt::format("{}.processors[{}]", where, i), vocab_size, out, depth + 1);
  } else {
    throw ConfigError(
        fmt::format("{}.type: {}: not a post-processor polyhal implements (BertProcessing, "
                    "RobertaProcessing, TemplateProcessing, ByteLevel, Sequence)",
                    where, type));
  }
}

}  // namespace

std::size_t PostProcessor::added(bool is_pair) const {
  std::size_t n = 0;
  for (const TemplateItem& item : is_pair ? pair : single) n += item.special_ids.size();
  return n;
}

PostProcessor make_post_processor(const nlohmann::json& json, const std::string& where,
                                  std::size_t vocab_size) {
  PostProcessor out;
  if (!json.is_null()) read_into(json, where, vocab_size, out, 0);
  if (out.single.empty()) out.single = {{{}, 0, 0}};
  if (out.pair.empty()) out.pair = {{{}, 0, 0}, {{}, 1, 1}};
  return out;
}

}  // namespace polyhal::text
