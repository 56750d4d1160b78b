#pragma once
// The int8 linear's product on CPUs with AVX2 and no VNNI, for few rows: u8
// X [M, K] times seven-bit s8 W [N, K]^T with vpmaddubsw (whose pair sums of
// u8 x s7 cannot saturate, int8.hpp), with the whole epilogue (zero point,
// the row and column steps, bias, GELU, residual) applied to each 4 x 16
// tile while it is still in registers. oneDNN's gemm-based int8 matmul
// below VNNI copies both operands into its panels on every call and applies
// the epilogue in a second pass over its s32 sums, which at one or two
// sentences' rows costs about as much as the products
// (onednn_int8_linear.cpp kFusedRows). For more rows the same epilogue runs
// alone over the s32 sums of oneDNN's 1x1 convolution (avx2_int8_epilogue).
#include <cstdint>
#include <vector>

#include "aligned_bytes.hpp"
#include "polyhal/op_schema.hpp"

namespace polyhal::cpu {

/// W [N, K] (s8, |w| <= 63) packed for avx2_int8_gemm: panels of 16 output
/// channels, each K / 4 groups of 16 x 4 bytes (four consecutive k of each
/// channel), and the per-channel sums of W for the zero point.
class Avx2Int8Weights {
 public:
  /// Whether a linear of these sizes can use it: N a multiple of 16, K of 4.
  static bool fits(std::int64_t n, std::int64_t k) noexcept { return n % 16 == 0 && k % 4 == 0; }

  Avx2Int8Weights(const std::int8_t* w, std::int64_t n, std::int64_t k);

  std::int64_t n() const noexcept { return n_; }
  std::int64_t k() const noexcept { return k_; }
  const std::int8_t* panel(std::int64_t first_channel) const noexcept {
    return reinterpret_cast<const std::int8_t*>(packed_.get()) + first_channel * k_;
  }
  const std::int32_t* sums() const noexcept { return sums_.data(); }
  /// Bytes the packing of an N x K linear holds.
  static std::uint64_t bytes_for(std::int64_t n, std::int64_t k) noexcept {
    return static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(k + 4);
  }

 private:
  std::int64_t n_ = 0, k_ = 0;
  AlignedBytes packed_;
  std::vector<std::int32_t> sums_;
};

/// What turns the s32 sums into the linear's f32 output, per element:
/// ((sum - zero_point * sums[n]) * row_step[m] * column_step[n] + bias[n]),
/// then `activation` (none or GELU), then + residual[m, n].
struct Int8Epilogue {
  std::int32_t zero_point = 0;               ///< X's (128 when s8 came in as u8 + 128)
  const float* row_step = nullptr;           ///< [M], or null for 1
  const float* column_step = nullptr;        ///< [N]
  const float* bias = nullptr;               ///< [N]
  Activation activation = Activation::none;  ///< none or gelu
  const float* residual = nullptr;           ///< [M, N], or null
};

/// out [M, N] (f32) = epilogue(x [M, K] (u8) x w^T), on the OpenMP pool.
void avx2_int8_gemm(const std::uint8_t* x, std::int64_t m, const Avx2Int8Weights& w,
                    const Int8Epilogue& epilogue, float* out);

/// out [M, N] (f32) = epilogue(sums [M, N]), the s32 sums of a product
/// computed elsewhere, on the OpenMP pool; `weight_sums` [N] are W's per
/// output channel (read when the zero point is not 0). `sums` may be `out`
/// itself (each element is read before it is written), but must not
/// overlap the residual. N must be a multiple of 8.
void avx2_int8_epilogue(const std::int32_t* sums, std::int64_t m, std::int64_t n,
                        const std::int32_t* weight_sums, const Int8Epilogue& epilogue, float* out);

}  // namespace polyhal::cpu
