#pragma once
// LayerNorm and residual adds for training on the CPU (train_kernels.hpp
// "layernorm_train", "layernorm_backward", "add"), one pass each on the
// OpenMP pool with the bf16 rounding of round_to=bf16 fused in, instead of
// the reference kernels plus a separate rounding pass. Statistics (mean,
// rstd) and the parameter gradients stay f32, as the dense kernels keep
// their weight gradients: only activations are held at bf16.
#include <memory>

#include "polyhal/kernel.hpp"

namespace polyhal::cpu {

std::unique_ptr<Kernel> make_omp_layernorm_train(const KernelDesc& desc);
std::unique_ptr<Kernel> make_omp_layernorm_backward(const KernelDesc& desc);
std::unique_ptr<Kernel> make_omp_add(const KernelDesc& desc);

}  // namespace polyhal::cpu
