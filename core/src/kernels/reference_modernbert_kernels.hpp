#pragma once
// The reference kernels of ModernBERT's ops (rotary positions and GeGLU),
// registered with the other training ops by register_reference_train_kernels;
// inference programs run them too (through the stored-precision adapter).
#include <memory>

#include "polyhal/kernel.hpp"
#include "polyhal/parallel.hpp"

namespace polyhal::detail {

/// rotary and rotary_backward (train_kernels.hpp).
std::unique_ptr<Kernel> rotary(const KernelDesc& d, const ParallelFor& par);
/// geglu and geglu_backward.
std::unique_ptr<Kernel> geglu(const KernelDesc& d, const ParallelFor& par);
/// mean_pool and mean_pool_backward.
std::unique_ptr<Kernel> mean_pool(const KernelDesc& d, const ParallelFor& par);

}  // namespace polyhal::detail
