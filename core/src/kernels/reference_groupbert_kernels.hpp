#pragma once
// The reference kernels of GroupBERT's training ops, registered with the
// other training ops by register_reference_train_kernels.
#include <memory>

#include "polyhal/kernel.hpp"
#include "polyhal/parallel.hpp"

namespace polyhal::detail {

/// grouped_dense and grouped_dense_backward; with `f16_partials` every
/// partial sum is rounded to f16.
std::unique_ptr<Kernel> grouped_dense(const KernelDesc& d, const ParallelFor& par,
                                      bool f16_partials);
std::unique_ptr<Kernel> grouped_dense_backward(const KernelDesc& d, const ParallelFor& par,
                                               bool f16_partials);
/// sequence_conv and sequence_conv_backward.
std::unique_ptr<Kernel> sequence_conv(const KernelDesc& d, const ParallelFor& par,
                                      bool f16_partials);
std::unique_ptr<Kernel> sequence_conv_backward(const KernelDesc& d, const ParallelFor& par,
                                               bool f16_partials);
/// glu, glu_backward, swish and swish_backward.
std::unique_ptr<Kernel> gated_elementwise(const KernelDesc& d, const ParallelFor& par);

}  // namespace polyhal::detail
