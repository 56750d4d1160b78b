#include "polyhal/app/config_value.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>

#include "polyhal/app/config.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

ConfigValue::ConfigValue(const YAML::Node& node, std::string key, const RunConfig& config)
    : node_(std::make_unique<YAML::Node>(node)), key_(std::move(key)), config_(&config) {}

ConfigValue::ConfigValue(const ConfigValue& other)
    : node_(std::make_unique<YAML::Node>(*other.node_)), key_(other.key_), config_(other.config_) {}

ConfigValue& ConfigValue::operator=(const ConfigValue& other) {
  if (this != &other) {
    node_ = std::make_unique<YAML::Node>(*other.node_);
    key_ = other.key_;
    config_ = other.config_;
  }
  return *this;
}

ConfigValue::~ConfigValue() = default;

void ConfigValue::fail(const std::string& problem) const {
  config_->fail(key_, problem);
}

std::string ConfigValue::text() const {
  // (A node that is not there, such as the value of a key that is itself a
  // list, is not "defined": yaml-cpp throws on asking its type.)
  if (!node_->IsDefined() || node_->IsNull()) fail("expected a value, got nothing");
  if (!node_->IsScalar()) fail("expected a single value, got a list or mapping");
  return node_->Scalar();
}

std::int64_t ConfigValue::integer(std::int64_t min, std::int64_t max) const {
  const std::string given = text();
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(given.data(), given.data() + given.size(), value);
  if (ec != std::errc() || end != given.data() + given.size() || given.empty()) {
    fail(fmt::format("expected {}, got \"{}\"", min == 1 ? "a positive integer" : "an integer",
                     given));
  }
  if (value < min) fail(fmt::format("expected an integer >= {}, got {}", min, value));
  if (value > max) fail(fmt::format("expected an integer <= {}, got {}", max, value));
  return value;
}

bool ConfigValue::boolean() const {
  const std::string given = text();
  if (given == "true") return true;
  if (given == "false") return false;
  fail(fmt::format("expected true or false, got \"{}\"", given));
}

double ConfigValue::number() const {
  const std::string given = text();
  try {
    std::size_t used = 0;
    const double value = std::stod(given, &used);
    if (used == given.size() && std::isfinite(value)) return value;
  } catch (const std::exception&) {
  }
  fail(fmt::format("expected a number, got \"{}\"", given));
}

DType ConfigValue::dtype() const {
  const std::string given = text();
  const auto type = parse_dtype(given);
  if (!type) fail(fmt::format("expected one of f32, f16, bf16, got \"{}\"", given));
  return *type;
}

TriState ConfigValue::tri_state() const {
  const std::string given = one_of({"auto", "true", "false"});
  return given == "true" ? TriState::yes : given == "false" ? TriState::no : TriState::automatic;
}

std::filesystem::path ConfigValue::path() const {
  // The one rule for paths (docs/config.md): relative to the current
  // directory, so an installed config in /usr/share reads and writes where
  // the user runs it. Made absolute here, so messages name the real place.
  return std::filesystem::absolute(std::filesystem::path(text())).lexically_normal();
}

std::string ConfigValue::one_of(const std::vector<std::string>& choices) const {
  std::string given = text();
  for (const auto& choice : choices)
    if (given == choice) return given;
  const std::string listed =
      choices.size() < 2
          ? fmt::format("{}", fmt::join(choices, ""))
          : fmt::format("{} or {}", fmt::join(choices.begin(), choices.end() - 1, ", "),
                        choices.back());
  fail(fmt::format("expected {}, got \"{}\"", listed, given));
}

bool ConfigValue::is_list() const {
  return node_->IsDefined() && node_->IsSequence();
}

bool ConfigValue::is_map() const {
  return node_->IsDefined() && node_->IsMap();
}

std::vector<ConfigValue> ConfigValue::items() const {
  std::vector<ConfigValue> out;
  if (!is_list()) {
    out.push_back(*this);
    return out;
  }
  for (const auto& item : *node_) out.emplace_back(item, key_, *config_);
  return out;
}

ConfigValue ConfigValue::named(std::string key) const {
  return ConfigValue(*node_, std::move(key), *config_);
}

bool ConfigValue::has(const std::string& name) const {
  const YAML::Node& node = *node_;  // const: a lookup must not add the key
  return is_map() && node[name].IsDefined();
}

ConfigValue ConfigValue::operator[](const std::string& name) const {
  const YAML::Node& node = *node_;
  return ConfigValue(node[name], key_.empty() ? name : key_ + "." + name, *config_);
}

std::vector<std::string> ConfigValue::names() const {
  std::vector<std::string> out;
  if (!is_map()) return out;
  for (const auto& entry : *node_) {
    if (!entry.first.IsScalar()) fail("expected key names, got a list or mapping as a key");
    out.push_back(entry.first.Scalar());
  }
  return out;
}

}  // namespace polyhal
