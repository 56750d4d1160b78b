#include "sentence_pooling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "polyhal/app/json_input.hpp"
#include "polyhal/error.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

nlohmann::json read_json(const std::filesystem::path& file) {
  detail::refuse_special_or_oversized_file(file, std::uintmax_t{1} << 20, "model's JSON file");
  std::ifstream in(file);
  try {
    return parse_json_input(in, file.string());
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
}

/// 1_Pooling/config.json's mode; "" when the directory has none.
std::string pooling_of(const std::filesystem::path& dir) {
  const auto file = dir / "1_Pooling" / "config.json";
  if (!std::filesystem::exists(file)) return "";
  const auto config = read_json(file);
  const auto on = [&](const char* key) { return config.value(key, false) == true; };
  std::vector<std::string> modes;
  if (on("pooling_mode_mean_tokens")) modes.push_back("mean");
  if (on("pooling_mode_cls_token")) modes.push_back("cls");
  if (on("pooling_mode_max_tokens")) modes.push_back("max");
  for (const char* unsupported : {"pooling_mode_mean_sqrt_len_tokens",
                                  "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"}) {
    if (on(unsupported))
      throw ConfigError(fmt::format(
          "{}: {} is a pooling polyhal does not implement (it does mean, cls and max); set "
          "inference.pooling to one of those to override",
          file.string(), unsupported));
  }
  if (modes.size() != 1)
    throw ConfigError(
        fmt::format("{}: {} pooling modes on at once; polyhal takes exactly one (mean, cls or max)",
                    file.string(), modes.size()));
  return modes.front();
}

/// Whether modules.json lists sentence-transformers' Normalize module.
bool normalizes(const std::filesystem::path& dir) {
  const auto file = dir / "modules.json";
  if (!std::filesystem::exists(file)) return false;
  const auto modules = read_json(file);
  if (!modules.is_array())
    throw ConfigError(fmt::format("{}: expected a list of modules", file.string()));
  for (const auto& module : modules)
    if (module.is_object() && module.value("type", "") == "sentence_transformers.models.Normalize")
      return true;
  return false;
}

}  // namespace

SentencePooling resolve_sentence_pooling(const std::string& pooling, const std::string& normalize,
                                         const std::filesystem::path& model_dir) {
  SentencePooling out;
  out.mode = pooling;
  if (pooling == "auto") {
    const std::string found = model_dir.empty() ? "" : pooling_of(model_dir);
    out.mode = found.empty() ? "none" : found;
    if (!found.empty()) out.source = (model_dir / "1_Pooling" / "config.json").string();
  }
  out.normalize = normalize == "true";
  if (normalize == "auto") {
    out.normalize = out.mode != "none" && !model_dir.empty() && normalizes(model_dir);
    if (out.normalize)
      out.source += (out.source.empty() ? "" : ", ") + (model_dir / "modules.json").string();
  }
  return out;
}

std::vector<float> pool_sentence(std::span<const float> hidden, std::span<const std::int32_t> mask,
                                 std::int64_t hidden_size, const SentencePooling& pooling) {
  const auto h = static_cast<std::size_t>(hidden_size);
  std::vector<double> sum(h, 0.0);
  std::vector<float> out(h, 0.0f);
  if (pooling.mode == "cls") {
    std::copy(hidden.begin(), hidden.begin() + static_cast<std::ptrdiff_t>(h), out.begin());
  } else {
    // Over the real tokens ([CLS] and [SEP] included), as sentence-transformers.
    std::size_t tokens = 0;
    std::vector<float> most(h, -std::numeric_limits<float>::infinity());
    for (std::size_t t = 0; t < mask.size(); ++t) {
      if (mask[t] == 0) continue;
      ++tokens;
      for (std::size_t i = 0; i < h; ++i) {
        const float x = hidden[t * h + i];
        sum[i] += x;
        most[i] = std::max(most[i], x);
      }
    }
    for (std::size_t i = 0; i < h; ++i)
      out[i] =
          pooling.mode == "max"
              ? most[i]
              : static_cast<float>(sum[i] / static_cast<double>(std::max<std::size_t>(tokens, 1)));
  }
  if (pooling.normalize) {
    double norm = 0.0;
    for (const float x : out) norm += static_cast<double>(x) * x;
    // torch.nn.functional.normalize's eps: a zero vector stays zero.
    const double scale = 1.0 / std::max(std::sqrt(norm), 1e-12);
    for (float& x : out) x = static_cast<float>(x * scale);
  }
  return out;
}

}  // namespace polyhal
