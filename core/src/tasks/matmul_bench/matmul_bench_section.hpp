#pragma once
// Task matmul-bench's schema: its config section `matmul_bench`.
#include "polyhal/app/config_schema.hpp"

namespace polyhal {

const TaskSchema& matmul_bench_schema();

}  // namespace polyhal
