#pragma once
/// @file config_value.hpp
/// One value of a config being read, with the key it was given under. Every
/// reading checks the value's form and range and, when it is wrong, throws a
/// ConfigError naming where the value came from (file:line, or the --set)
/// and the key, so a key's declaration (config_keys.hpp) never formats an
/// error location itself.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/tri_state.hpp"
#include "polyhal/dtype.hpp"

namespace YAML {
class Node;
}

namespace polyhal {

struct RunConfig;

/// Any integer key: far below where products of a few of them overflow int64.
inline constexpr std::int64_t kMaxConfigInteger = std::int64_t{1} << 40;
/// Repetitions (iterations, warm-up): an int, and hours at a millisecond each.
inline constexpr std::int64_t kMaxRepeats = 1'000'000'000;
/// A duration or timeout: about 11 days; a steady_clock deadline from it never overflows.
inline constexpr double kMaxSeconds = 1e6;

class ConfigValue {
 public:
  /// `node` as given under `key` ("batch.micro") of `config` (whose file,
  /// lines and overrides say where it came from).
  ConfigValue(const YAML::Node& node, std::string key, const RunConfig& config);
  ConfigValue(const ConfigValue& other);
  ConfigValue& operator=(const ConfigValue& other);
  ~ConfigValue();

  const std::string& key() const noexcept { return key_; }
  /// Throws ConfigError "<where>: key '<key>': <problem>".
  [[noreturn]] void fail(const std::string& problem) const;

  /// A single value's text (not a list or a mapping, not empty).
  std::string text() const;
  /// An integer in [min, max]; `max` keeps counts and sizes far from
  /// overflow in what is computed from them.
  std::int64_t integer(std::int64_t min, std::int64_t max = kMaxConfigInteger) const;
  bool boolean() const;
  /// A finite number.
  double number() const;
  DType dtype() const;
  /// auto, true or false.
  TriState tri_state() const;
  /// A path, made absolute: a relative path is relative to the current
  /// directory (docs/config.md, "Paths").
  std::filesystem::path path() const;
  /// One of `choices`: "expected a, b or c, got \"x\"" otherwise.
  std::string one_of(const std::vector<std::string>& choices) const;

  bool is_list() const;
  bool is_map() const;
  /// A list's items (each read under this key); a single value is a list of one.
  std::vector<ConfigValue> items() const;
  /// The same value under another key name, for messages ("shapes[2]").
  ConfigValue named(std::string key) const;
  /// A mapping's entry `name` (key "<key>.<name>"); has() says whether it is there.
  bool has(const std::string& name) const;
  ConfigValue operator[](const std::string& name) const;
  /// A mapping's key names, in file order.
  std::vector<std::string> names() const;

 private:
  std::unique_ptr<YAML::Node> node_;
  std::string key_;
  const RunConfig* config_;
};

}  // namespace polyhal
