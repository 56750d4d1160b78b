#include "polyhal/app/int8_scales.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "model/families/model_family.hpp"
#include "polyhal/error.hpp"
#include "util/atomic_file.hpp"
#include "util/json_file.hpp"

namespace polyhal {

/// The smallest calibrated largest |x| of a linear: its int8 step, |x| /
/// 127, must be a normal f32 (1e-300 became a step of 0).
constexpr double kSmallestMaxAbs = 127.0 * std::numeric_limits<float>::min();
namespace {

constexpr const char* kFormat = "polyhal int8 scales 1";
// A BERT-large file is about 0.6 MiB (per-channel maxima of 48 linears);
// anything far larger is not one.
constexpr std::uintmax_t kMaxScalesFileBytes = std::uintmax_t{8} << 20;
constexpr std::size_t kFingerprintStride = 61;

struct Fnv1a {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  void bytes(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
      hash ^= p[i];
      hash *= 0x100000001b3ull;
    }
  }
  template <class T>
  void value(T v) {
    bytes(&v, sizeof v);
  }
};

const char* const kDimensions[] = {"num_hidden_layers", "hidden_size", "intermediate_size"};

std::int64_t dimension(const BertConfig& c, const std::string& name) {
  if (name == "num_hidden_layers") return c.num_hidden_layers;
  if (name == "hidden_size") return c.hidden_size;
  return c.intermediate_size;
}

}  // namespace

std::vector<std::string> int8_linear_names(const BertConfig& config) {
  std::vector<std::string> names;
  for (std::int64_t l = 0; l < config.num_hidden_layers; ++l) {
    const std::string p = families::encoder_layer_prefix(l);
    for (const char* linear :
         {"attention.self.qkv", "attention.output.dense", "intermediate.dense", "output.dense"})
      names.push_back(p + linear);
  }
  return names;
}

bool int8_smoothed(const std::string& linear_name) {
  const auto ends_with = [&](const std::string& tail) {
    return linear_name.size() >= tail.size() &&
           linear_name.compare(linear_name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends_with(".attention.self.qkv") || ends_with(".intermediate.dense");
}

std::vector<float> int8_smoothing(const std::vector<float>& channel_max_abs,
                                  const std::vector<float>& weights, std::int64_t n,
                                  std::int64_t k) {
  const auto columns = static_cast<std::size_t>(k);
  if (channel_max_abs.size() != columns || weights.size() != columns * static_cast<std::size_t>(n))
    throw RuntimeFailure(fmt::format("int8 smoothing: {} channel maxima for W[{}, {}]",
                                     channel_max_abs.size(), n, k));
  std::vector<float> weight_max(columns, 0.0f);
  for (std::size_t i = 0; i < weights.size(); ++i)
    weight_max[i % columns] = std::max(weight_max[i % columns], std::fabs(weights[i]));
  std::vector<float> s(columns, 1.0f);
  for (std::size_t j = 0; j < columns; ++j)
    if (channel_max_abs[j] > 0.0f && weight_max[j] > 0.0f)
      s[j] = std::clamp(std::sqrt(channel_max_abs[j] / weight_max[j]), 1e-4f, 1e4f);
  return s;
}

std::string model_fingerprint(const TensorMap& weights) {
  Fnv1a fnv;
  for (const auto& [name, tensor] : weights) {
    fnv.bytes(name.data(), name.size());
    for (const std::int64_t d : tensor.shape) fnv.value(d);
    const auto& v = tensor.values;
    for (std::size_t i = 0; i < v.size(); i += kFingerprintStride)
      fnv.value(std::bit_cast<std::uint32_t>(v[i]));
    if (!v.empty()) fnv.value(std::bit_cast<std::uint32_t>(v.back()));
  }
  return fmt::format("fnv1a64:{:016x}", fnv.hash);
}

Int8Scales read_int8_scales(const std::filesystem::path& file, const BertConfig& config,
                            const std::string& key) {
  const auto where = [&](const std::string& what) {
    return fmt::format("{}: key '{}': {}", file.string(), key, what);
  };
  const nlohmann::json json =
      detail::read_json_object(file, kMaxScalesFileBytes, "int8 scales file");
  // A whole number: a fraction, a string or 1e300 is not one (get<int64_t>
  // of a double past its range is undefined).
  const auto whole = [&](const nlohmann::json& value, const char* name) {
    if (!value.is_number_integer())
      throw ConfigError(where(fmt::format("\"{}\" must be a whole number, got {}", name,
                                          value.is_number() ? "a fraction or an out-of-range number"
                                                            : std::string(value.type_name()))));
    return value.get<std::int64_t>();
  };
  Int8Scales scales;
  try {
    if (json.value("format", std::string()) != kFormat)
      throw ConfigError(where(fmt::format(
          "not an int8 scales file (\"format\" must be \"{}\"); write one with model.calibrate",
          kFormat)));
    const auto& model = json.at("model");
    for (const char* name : kDimensions) {
      const std::int64_t theirs = whole(model.at(name), name);
      if (theirs != dimension(config, name))
        throw ConfigError(where(fmt::format(
            "calibrated for another model: {} {} in the file, {} in this one; calibrate this "
            "model with model.calibrate",
            name, theirs, dimension(config, name))));
    }
    scales.fingerprint = model.at("fingerprint").get<std::string>();
    const auto& calibration = json.at("calibration");
    scales.batches = whole(calibration.at("batches"), "batches");
    scales.precision = calibration.value("precision", std::string());
    const auto& max_abs = json.at("max_abs");
    for (const std::string& name : int8_linear_names(config)) {
      if (!max_abs.contains(name))
        throw ConfigError(where(fmt::format("no scale for linear \"{}\"", name)));
      const double value = max_abs.at(name).get<double>();
      if (!std::isfinite(value) || value < kSmallestMaxAbs || value > 3.0e38)
        throw ConfigError(where(fmt::format(
            "the scale of \"{}\" is {}; a calibrated largest |x| is finite and from {:g} (the "
            "smallest whose int8 step, |x| / 127, is a normal f32) to 3e38",
            name, value, kSmallestMaxAbs)));
      scales.max_abs[name] = static_cast<float>(value);
    }
    if (json.contains("channel_max_abs")) {
      const auto& channels = json.at("channel_max_abs");
      for (const std::string& name : int8_linear_names(config)) {
        if (!int8_smoothed(name)) continue;
        if (!channels.contains(name))
          throw ConfigError(where(fmt::format("no per-channel maxima for linear \"{}\"", name)));
        const auto& values = channels.at(name);
        if (!values.is_array() || values.size() != static_cast<std::size_t>(config.hidden_size))
          throw ConfigError(
              where(fmt::format("the per-channel maxima of \"{}\" must be {} numbers (hidden_size)",
                                name, config.hidden_size)));
        auto& out = scales.channel_max_abs[name];
        for (std::size_t j = 0; j < values.size(); ++j) {
          const double value = values[j].get<double>();
          if (!std::isfinite(value) || value < 0.0 || value > 3.0e38 ||
              (value > 0.0 && value < std::numeric_limits<float>::min()))
            throw ConfigError(where(fmt::format(
                "channel {} of \"{}\" is {}; a calibrated largest |x| is 0, or finite from the "
                "smallest normal f32 ({:g}) to 3e38",
                j, name, value, std::numeric_limits<float>::min())));
          out.push_back(static_cast<float>(value));
        }
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(where(fmt::format("malformed: {}", e.what())));
  }
  return scales;
}

void check_int8_fingerprint(const Int8Scales& scales, const std::string& fingerprint,
                            const std::filesystem::path& file, const std::string& key) {
  if (scales.fingerprint != fingerprint)
    throw ConfigError(fmt::format(
        "{}: key '{}': calibrated on other weights (fingerprint {}, these weights are {}); "
        "calibrate these weights with model.calibrate",
        file.string(), key, scales.fingerprint, fingerprint));
}

void write_int8_scales(const std::filesystem::path& file, const BertConfig& config,
                       const Int8Scales& scales) {
  nlohmann::ordered_json json;
  json["format"] = kFormat;
  nlohmann::ordered_json model;
  model["fingerprint"] = scales.fingerprint;
  for (const char* name : kDimensions) model[name] = dimension(config, name);
  json["model"] = model;
  json["calibration"] = {
      {"batches", scales.batches}, {"statistic", "max_abs"}, {"precision", scales.precision}};
  nlohmann::ordered_json max_abs;
  for (const std::string& name : int8_linear_names(config)) {
    const auto it = scales.max_abs.find(name);
    if (it == scales.max_abs.end())
      throw RuntimeFailure(fmt::format("calibration saw no input of linear \"{}\"", name));
    // An input that was zero throughout still gets a usable (tiny) range.
    max_abs[name] = std::max(it->second, std::numeric_limits<float>::min());
  }
  json["max_abs"] = max_abs;
  nlohmann::ordered_json channels;
  for (const auto& [name, values] : scales.channel_max_abs)
    if (int8_smoothed(name)) channels[name] = values;
  if (!channels.empty()) json["channel_max_abs"] = channels;
  detail::write_file_atomically(file, json.dump(2) + "\n");
}

}  // namespace polyhal
