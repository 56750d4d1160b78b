#pragma once
// Element-wise reduction helpers shared by the collective engines.
#include <cstddef>

#include "polyhal/collective.hpp"
#include "polyhal/dtype.hpp"

namespace polyhal::detail {

/// Loads `count` elements of `type` from `src` (at element `offset`) as f32.
void load_f32(const void* src, DType type, std::size_t offset, std::size_t count, float* out);
/// Stores f32 values into `dst` of `type` (at element `offset`), rounding once.
void store_f32(const float* values, void* dst, DType type, std::size_t offset, std::size_t count);
/// acc = acc (op) next, element-wise (mean accumulates like sum).
void accumulate(float* acc, const float* next, std::size_t count, ReduceOp op);
/// Checks the dtype is one the collectives reduce (f32, f16, bf16); throws otherwise.
void require_reducible(DType type);

}  // namespace polyhal::detail
