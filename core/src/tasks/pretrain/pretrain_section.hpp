#pragma once
// Task pretrain's config: its one-value section `steps` and its schema.
#include <cstdint>

#include "polyhal/app/config_schema.hpp"

namespace polyhal {

struct StepsSection {
  static constexpr const char* kSection = "steps";
  std::int64_t steps = 100;  ///< optimizer steps to train
};

const TaskSchema& pretrain_schema();

}  // namespace polyhal
