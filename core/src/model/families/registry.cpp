// The encoder families polyhal builds. A new family is a file beside
// bert.cpp, a ModelType value and one line here.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

#include "model/families/model_family.hpp"
#include "polyhal/app/json_input.hpp"
#include "polyhal/error.hpp"

namespace polyhal::families {

const ModelFamily& bert_family();
const ModelFamily& groupbert_family();
const ModelFamily& roberta_family();
const ModelFamily& xlm_roberta_family();
const ModelFamily& camembert_family();
const ModelFamily& distilbert_family();
const ModelFamily& electra_family();
const ModelFamily& mpnet_family();
const ModelFamily& modernbert_family();

namespace {

/// The registered families, indexed by ModelType.
const std::array<const ModelFamily*, 9>& registry() {
  static const std::array<const ModelFamily*, 9> families{
      &bert_family(),        &groupbert_family(), &roberta_family(),
      &xlm_roberta_family(), &camembert_family(), &distilbert_family(),
      &electra_family(),     &mpnet_family(),     &modernbert_family()};
  return families;
}

std::string quoted_names() {
  std::vector<std::string> names;
  for (const ModelFamily* family : registry())
    names.push_back(fmt::format("\"{}\"", family->name()));
  if (names.size() == 2) return names[0] + " or " + names[1];
  return fmt::format("one of {}", fmt::join(names, ", "));
}

}  // namespace

std::span<const ModelFamily* const> model_families() {
  return registry();
}

const ModelFamily& model_family(ModelType type) {
  return *registry().at(static_cast<std::size_t>(type));
}

std::optional<std::string> renamed_prefix(std::span<const CheckpointPrefix> prefixes,
                                          const std::string& name) {
  for (const auto& [checkpoint, polyhal] : prefixes)
    if (name.starts_with(checkpoint))
      return polyhal + name.substr(std::string_view(checkpoint).size());
  return std::nullopt;
}

std::string encoder_layer_prefix(std::int64_t layer) {
  return fmt::format("bert.encoder.layer.{}.", layer);
}

void ConfigJson::fail(const char* key, const std::string& message) const {
  throw ConfigError(fmt::format("{}: key '{}': {}", file_, key, message));
}

// Each value of the type its field has: an integer is never read from a
// float (1e300 would not fit), a string never from a number.
void ConfigJson::read(const char* key, std::int64_t& field) const {
  if (!has(key)) return;
  if (!at(key).is_number_integer()) fail(key, "unexpected value " + json_excerpt(at(key)));
  at(key).get_to(field);
}
void ConfigJson::read(const char* key, double& field) const {
  if (!has(key)) return;
  if (!at(key).is_number()) fail(key, "unexpected value " + json_excerpt(at(key)));
  at(key).get_to(field);
}
void ConfigJson::read(const char* key, std::string& field) const {
  if (!has(key)) return;
  if (!at(key).is_string()) fail(key, "unexpected value " + json_excerpt(at(key)));
  at(key).get_to(field);
}

void ConfigJson::read(const char* key, bool& field) const {
  if (!has(key)) return;
  if (!at(key).is_boolean()) fail(key, "expected true or false, got " + json_excerpt(at(key)));
  at(key).get_to(field);
}

const ModelFamily& family_of_config(const ConfigJson& json) {
  const ModelFamily* chosen = nullptr;
  std::string named;
  json.read("model_type", named);
  if (json.has("model_type")) {
    for (const ModelFamily* family : registry())
      if (named == family->name()) chosen = family;
    if (chosen == nullptr)
      json.fail("model_type", fmt::format("expected {}, got \"{}\"", quoted_names(), named));
  }
  for (const ModelFamily* family : registry()) {
    const char* marker = family->marker_key();
    if (marker == nullptr || !json.has(marker)) continue;
    if (!json.at(marker).is_boolean())
      json.fail(marker, "expected true or false, got " + json_excerpt(json.at(marker)));
    if (!json.at(marker).get<bool>()) continue;
    if (chosen != nullptr && chosen != family)
      json.fail(marker,
                fmt::format("true, but key 'model_type' says \"{}\"; remove one of them", named));
    chosen = family;
  }
  if (chosen == nullptr) chosen = &bert_family();  // Google's bert_config.json names none
  for (const ModelFamily* family : registry()) {
    if (family == chosen) continue;
    for (const char* key : family->own_keys())
      if (json.has(key))
        json.fail(key, fmt::format("a {} setting in a \"{}\" model (set \"model_type\": \"{}\")",
                                   family->title(), chosen->name(), family->name()));
  }
  return *chosen;
}

}  // namespace polyhal::families
