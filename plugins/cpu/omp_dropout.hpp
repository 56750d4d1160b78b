#pragma once
// Dropout on the CPU: the shared mask (polyhal/dropout_mask.hpp) regenerated
// and applied in one pass, vectorised with AVX-512 where the CPU has it (the
// mask is a 64-bit hash per element: scalar code would cost as much as the
// GEMMs around it).
#include <cstdint>
#include <memory>

#include "polyhal/dropout_mask.hpp"
#include "polyhal/kernel.hpp"

namespace polyhal::cpu {

/// y[k] = x[k] * mask(first + k) for k in [0, count), on the calling thread,
/// rounded to bf16 when asked; x == y is allowed. `avx512`: the device's ISA
/// choice allows AVX-512 (the device.isa cap applies here as to oneDNN).
void apply_dropout(const DropoutMask& mask, std::uint64_t first, const float* x, float* y,
                   std::int64_t count, bool avx512, bool round_to_bf16 = false);

/// The same on bf16 storage (bits): widen, multiply, round to nearest even.
void apply_dropout_bf16(const DropoutMask& mask, std::uint64_t first, const std::uint16_t* x,
                        std::uint16_t* y, std::int64_t count, bool avx512);

/// train_kernels.hpp "dropout" and "dropout_backward" (the same product):
/// X, rng -> X * mask, on f32 or (round_to=bf16) bf16 storage.
std::unique_ptr<Kernel> make_omp_dropout(const KernelDesc& desc, bool avx512);

}  // namespace polyhal::cpu
