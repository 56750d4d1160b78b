#pragma once
/// @file int8_scales.hpp
/// The int8 scales file: what a calibration run (model.calibrate) measured at
/// the input of every encoder linear, and which model it measured, so that
/// model.precision int8 quantises with scales of the very weights it runs.
///
/// JSON, a few KiB: {"format": "polyhal int8 scales 1", "model": {"fingerprint",
/// "num_hidden_layers", "hidden_size", "intermediate_size"}, "calibration":
/// {"batches", "statistic": "max_abs", "precision"}, "max_abs": {linear name:
/// largest |x| seen}, "channel_max_abs": {linear name: [largest |x| per input
/// channel]}}. A linear's static input step is max_abs / 127 (int8.hpp); the
/// per-channel maxima (of the linears int8_smoothed names) give dynamic int8
/// its smoothing (int8_smoothing). A file without them is still read: it
/// serves static int8 only.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/safetensors.hpp"

namespace polyhal {

struct Int8Scales {
  std::string fingerprint;  ///< model_fingerprint of the calibrated weights
  std::int64_t batches = 0;
  std::string precision;  ///< the precision the calibration ran at
  /// Largest |x| at the input of each quantised linear (int8_linear_names).
  std::map<std::string, float> max_abs;
  /// Largest |x| per input channel of each linear int8_smoothed names.
  std::map<std::string, std::vector<float>> channel_max_abs;
};

/// True for the linears whose input is a LayerNorm output (the fused Q, K, V
/// and FFN up): their few outlier channels are what smoothing is for.
bool int8_smoothed(const std::string& linear_name);

/// SmoothQuant's factors (alpha 0.5) for a linear: s[k] = sqrt(channel_max_abs[k]
/// / max_n |W[n, k]|), 1 where either is 0, clamped to [1e-4, 1e4].
std::vector<float> int8_smoothing(const std::vector<float>& channel_max_abs,
                                  const std::vector<float>& weights, std::int64_t n,
                                  std::int64_t k);

/// The encoder linears model.precision int8 quantises, by Hugging Face module
/// name ("bert.encoder.layer.0.attention.self.qkv" for the fused Q, K, V;
/// then attention.output.dense, intermediate.dense, output.dense). The
/// embeddings, pooler and task heads stay in bf16.
std::vector<std::string> int8_linear_names(const BertConfig& config);

/// Identifies weights: FNV-1a 64 over every tensor's name, shape and every
/// 61st value (and the last), as "fnv1a64:<16 hex digits>". Cheap on a
/// BERT-large, and different for any other checkpoint, fine-tuned or not.
std::string model_fingerprint(const TensorMap& weights);

/// Reads `file`. ConfigError naming the file (and `key`, the config key
/// that named it) for a file that is not a scales file, another model's
/// dimensions, a missing linear, or a value that is not finite and > 0.
Int8Scales read_int8_scales(const std::filesystem::path& file, const BertConfig& config,
                            const std::string& key);

/// ConfigError unless `scales` were calibrated on weights with `fingerprint`.
void check_int8_fingerprint(const Int8Scales& scales, const std::string& fingerprint,
                            const std::filesystem::path& file, const std::string& key);

/// Writes `scales` for `config` atomically (never a half-written file).
void write_int8_scales(const std::filesystem::path& file, const BertConfig& config,
                       const Int8Scales& scales);

}  // namespace polyhal
