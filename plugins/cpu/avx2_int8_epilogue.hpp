#pragma once
// What turns an int8 linear's s32 sums into its f32 output on CPUs with AVX2
// and no VNNI, in one parallel pass: oneDNN's 1x1 convolution computes the
// sums there (onednn_int8_linear.cpp), and keeps its JIT kernel only without
// a per-row factor or a source zero point, so the dequantisation, bias,
// GELU and residual are applied here, over the sums it stored in the
// output itself.
#include <cstdint>

#include "polyhal/op_schema.hpp"

namespace polyhal::cpu {

/// What turns the s32 sums into the linear's f32 output, per element:
/// ((sum - zero_point * weight_sums[n]) * row_step[m] * column_step[n] +
/// bias[n]), then `activation` (none or GELU), then + residual[m, n].
struct Int8Epilogue {
  std::int32_t zero_point = 0;               ///< X's (128 when s8 came in as u8 + 128)
  const float* row_step = nullptr;           ///< [M], or null for 1
  const float* column_step = nullptr;        ///< [N]
  const float* bias = nullptr;               ///< [N]
  Activation activation = Activation::none;  ///< none or gelu
  const float* residual = nullptr;           ///< [M, N], or null
};

/// out [M, N] (f32) = epilogue(sums [M, N]), on the OpenMP pool;
/// `weight_sums` [N] are W's per output channel (read when the zero point
/// is not 0). `sums` may be `out` itself (each element is read before it is
/// written), but must not overlap the residual. N must be a multiple of 8.
void avx2_int8_epilogue(const std::int32_t* sums, std::int64_t m, std::int64_t n,
                        const std::int32_t* weight_sums, const Int8Epilogue& epilogue, float* out);

}  // namespace polyhal::cpu
