#pragma once
// Task inference's config: its section `inference` and its schema.
#include <filesystem>

#include "polyhal/app/config_schema.hpp"

namespace polyhal {

struct InferenceSection {
  static constexpr const char* kSection = "inference";
  int iterations = 20;
  int warmup = 3;
  /// When > 0: measured batches run until this many seconds have passed (at
  /// least one), as OpenVINO's benchmark_app -t; `iterations` is then unused.
  double duration_seconds = 0;
  std::filesystem::path output;
  /// Text inference: a sentence embedding per example (sentence_pooling.hpp):
  /// auto (what a sentence-transformers directory beside model.hf_config
  /// says, else none), none, mean, cls or max.
  std::string pooling = "auto";
  /// L2-normalise the embedding: auto (when the directory's modules.json
  /// lists a Normalize module), true or false.
  std::string normalize = "auto";
  /// Text inference: also write each real token's last hidden state.
  bool hidden_states = false;
  /// Text inference without a head: several lines share a row (packed
  /// attention), so no compute goes to padding; false: a line per row.
  bool packed = true;
};

const TaskSchema& inference_schema();

}  // namespace polyhal
