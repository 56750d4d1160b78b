#include "serving/splade_head.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "polyhal/error.hpp"
#include "text/packed_lines.hpp"

namespace polyhal {
namespace {

HostTensor take(TensorMap& tensors, const char* name, const std::filesystem::path& source) {
  auto it = tensors.find(name);
  if (it == tensors.end())
    throw ConfigError(fmt::format(
        "key 'inference.pooling': splade reads a *ForMaskedLM model's MLM head, and {} has no "
        "'{}': serve a SPLADE model's directory (its architectures BertForMaskedLM, "
        "RobertaForMaskedLM, DistilBertForMaskedLM), or pool with mean, cls or max",
        source.string(), name));
  HostTensor out = std::move(it->second);
  tensors.erase(it);
  return out;
}

/// a . b in eight running sums (which the compiler vectorises; one sum
/// in order would not be, without fast-math).
float dot(const float* a, const float* b, std::size_t n) {
  float sums[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t k = 0; k < 8; ++k) sums[k] += a[i + k] * b[i + k];
  float rest = 0;
  for (; i < n; ++i) rest += a[i] * b[i];
  return rest + ((sums[0] + sums[1]) + (sums[2] + sums[3])) +
         ((sums[4] + sums[5]) + (sums[6] + sums[7]));
}

}  // namespace

SpladeHead::SpladeHead(TensorMap& head_tensors, const HostTensor& word_embeddings,
                       double layer_norm_eps, const std::filesystem::path& source)
    : dense_weight_(take(head_tensors, "cls.predictions.transform.dense.weight", source)),
      dense_bias_(take(head_tensors, "cls.predictions.transform.dense.bias", source)),
      gamma_(take(head_tensors, "cls.predictions.transform.LayerNorm.weight", source)),
      beta_(take(head_tensors, "cls.predictions.transform.LayerNorm.bias", source)),
      decoder_(word_embeddings),
      decoder_bias_(take(head_tensors, "cls.predictions.bias", source)),
      eps_(layer_norm_eps) {
  // The head's tensors were named, not sized, by the encoder's reader.
  const auto h = word_embeddings.shape.size() == 2 ? word_embeddings.shape[1] : -1;
  const auto vocab = vocab_size();
  const auto sized = [&](const HostTensor& t, Shape want, const char* name) {
    if (t.shape != want)
      throw ConfigError(fmt::format("{}: tensor '{}' has shape {}, the model config needs {}",
                                    source.string(), name, fmt::join(t.shape, "x"),
                                    fmt::join(want, "x")));
  };
  sized(dense_weight_, {h, h}, "cls.predictions.transform.dense.weight");
  sized(dense_bias_, {h}, "cls.predictions.transform.dense.bias");
  sized(gamma_, {h}, "cls.predictions.transform.LayerNorm.weight");
  sized(beta_, {h}, "cls.predictions.transform.LayerNorm.bias");
  sized(decoder_bias_, {vocab}, "cls.predictions.bias");
}

std::int64_t SpladeHead::vocab_size() const noexcept {
  return decoder_.shape.empty() ? 0 : decoder_.shape[0];
}

std::vector<float> SpladeHead::weights(std::span<const float> hidden, std::size_t tokens) const {
  const auto h = static_cast<std::size_t>(gamma_.values.size());
  const auto vocab = static_cast<std::size_t>(vocab_size());
  std::vector<float> out(vocab, 0.0f);
  for (std::size_t t = 0; t < tokens; ++t) {
    std::vector<float> y = host_linear(hidden.subspan(t * h, h), dense_weight_, dense_bias_);
    double mean = 0, variance = 0;
    for (float& v : y) {
      v = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
      mean += v;
    }
    mean /= static_cast<double>(h);
    for (const float v : y) variance += (v - mean) * (v - mean);
    const double rstd = 1.0 / std::sqrt(variance / static_cast<double>(h) + eps_);
    for (std::size_t c = 0; c < h; ++c)
      y[c] = static_cast<float>((y[c] - mean) * rstd) * gamma_.values[c] + beta_.values[c];
    // relu, then log1p: a logit at or below zero adds nothing, and the max
    // over tokens starts at 0.
    for (std::size_t v = 0; v < vocab; ++v) {
      const float logit =
          dot(decoder_.values.data() + v * h, y.data(), h) + decoder_bias_.values[v];
      if (logit > 0) out[v] = std::max(out[v], std::log1p(logit));
    }
  }
  return out;
}

}  // namespace polyhal
