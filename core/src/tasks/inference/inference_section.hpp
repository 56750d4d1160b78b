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
};

const TaskSchema& inference_schema();

}  // namespace polyhal
