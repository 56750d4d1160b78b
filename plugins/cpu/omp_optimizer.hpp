#pragma once
// The optimizer's kernels on the CPU (train_kernels.hpp): AVX-512 on the
// OpenMP pool, bit-identical per element to the reference kernels.
#include <memory>

#include "polyhal/kernel.hpp"

namespace polyhal::cpu {

/// lamb_update or adamw_update (with the optional bf16 compute-copy output); needs AVX-512F.
std::unique_ptr<Kernel> make_omp_adam_update(const KernelDesc& desc);
/// sum_of_squares over fixed chunks (independent of the thread count); needs AVX-512F.
std::unique_ptr<Kernel> make_omp_sum_of_squares(const KernelDesc& desc);

}  // namespace polyhal::cpu
