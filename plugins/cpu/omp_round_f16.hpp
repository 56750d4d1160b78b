#pragma once
// X rounded through f16 for a linear's f16 products on the f32 kernel
// (LinearMath::f16_products where oneDNN has no f16 matmul): F16C's
// conversions under AVX-512 where the ISA choice allows, the contract's
// scalar rounding otherwise. Both give the same values.
#include <cstdint>

namespace polyhal::cpu {

/// out[i] = round_through(DType::f16, in[i]) for i < count, on the OpenMP pool.
void round_through_f16(const float* in, float* out, std::int64_t count, bool avx512);

}  // namespace polyhal::cpu
