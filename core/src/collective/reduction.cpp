#include "collective/reduction.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "polyhal/error.hpp"

namespace polyhal::detail {

void load_f32(const void* src, DType type, std::size_t offset, std::size_t count, float* out) {
  const char* base = static_cast<const char*>(src) + offset * dtype_size(type);
  convert(base, type, out, DType::f32, count);
}

void store_f32(const float* values, void* dst, DType type, std::size_t offset, std::size_t count) {
  char* base = static_cast<char*>(dst) + offset * dtype_size(type);
  convert(values, DType::f32, base, type, count);
}

void accumulate(float* acc, const float* next, std::size_t count, ReduceOp op) {
  if (op == ReduceOp::max) {
    for (std::size_t i = 0; i < count; ++i) acc[i] = std::max(acc[i], next[i]);
  } else {
    for (std::size_t i = 0; i < count; ++i) acc[i] += next[i];
  }
}

void require_reducible(DType type) {
  if (!is_floating(type)) {
    throw RuntimeFailure(
        fmt::format("collectives reduce f32, f16 and bf16, not {}", dtype_name(type)));
  }
}

}  // namespace polyhal::detail
