#pragma once
// Dynamic int8 quantisation of a linear's input, row by row (int8.hpp's
// rule), on the OpenMP pool: AVX-512 where the ISA choice allows it, AVX2
// otherwise (f32; the int8 kernels run on AVX2 and up only), the contract's
// scalar rule for bf16 without AVX-512. All give the same bytes.
#include <cstdint>

#include "polyhal/dtype.hpp"

namespace polyhal::cpu {

/// x[rows, columns] (f32 or bf16) -> q[rows, columns] s8 and step[rows],
/// step[r] = int8_scale(max |x[r, :]|), q = quantize_s8(x, 1 / step[r]).
/// `column_factor` (smoothing, int8.hpp): x[r, c] * column_factor[c] in
/// place of x[r, c], when given. `plus_128`: each q is written as the u8
/// q + 128 (its sign bit flipped), the form oneDNN's GEMM below VNNI takes,
/// while the row is still in cache.
void quantize_rows_s8(const void* x, DType type, std::int64_t rows, std::int64_t columns,
                      std::int8_t* q, float* step, bool avx512,
                      const float* column_factor = nullptr, bool plus_128 = false);

/// q[n] s8 -> the u8 q + 128 in place, on the OpenMP pool.
void add_128(std::int8_t* q, std::int64_t n);

/// The same for a GELU output (int8.hpp quantize_gelu_row_u8): q is u8.
void quantize_gelu_rows_u8(const void* x, DType type, std::int64_t rows, std::int64_t columns,
                           std::uint8_t* q, float* step, bool avx512);

}  // namespace polyhal::cpu
