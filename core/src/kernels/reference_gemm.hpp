#pragma once
// The f32 GEMM under the reference matmul and linear kernels, and the output
// rounding they share.
#include <cstddef>
#include <cstdint>

#include "polyhal/dtype.hpp"
#include "polyhal/reference_kernels.hpp"

namespace polyhal::detail {

/// c[m,n] = a[m,k] x b[k,n] (all row-major f32), rows in parallel. With
/// `f16_partials` every partial sum is rounded to f16 (IPU half accumulation).
void reference_gemm(const float* a, const float* b, float* c, std::size_t m, std::size_t n,
                    std::size_t k, bool f16_partials);

/// Stores f32 `values` into `dst` of `type`: round to nearest even, or
/// stochastically for f16 when `numerics` asks (seeded by `seed` and `run`).
void store_rounded(const float* values, void* dst, DType type, std::size_t count,
                   const MatMulNumerics& numerics, std::uint64_t run);

}  // namespace polyhal::detail
