#pragma once
/// @file boundary_layout.hpp
/// Size guards for every class of the plugin contract (the headers directly
/// in core/include/polyhal, the classes that cross the plugin boundary).
///
/// The plugin descriptor carries boundary_layout_fingerprint() as the plugin
/// saw it; the host refuses a plugin whose fingerprint differs from its own
/// (a header changed under a plugin that was not rebuilt), naming both. On
/// the reference platform (x86-64, libstdc++) each size is also pinned by a
/// static_assert in core/src/runtime/boundary_layout.cpp, so a change to any
/// of these classes fails the build until kAbiMajor is bumped and
/// docs/abi-changelog.md says why.
#include <cstdint>

#include "polyhal/backend.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"
#include "polyhal/dropout_mask.hpp"
#include "polyhal/error.hpp"
#include "polyhal/kernel.hpp"
#include "polyhal/op_schema.hpp"
#include "polyhal/property.hpp"
#include "polyhal/reference_kernels.hpp"
#include "polyhal/tensor.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal {

/// Calls `visit(name, sizeof, alignof)` for each boundary class, in a fixed order.
template <class Visit>
constexpr void for_each_boundary_class(Visit&& visit) {
#define POLYHAL_BOUNDARY_CLASS(T) visit(#T, sizeof(T), alignof(T))
  POLYHAL_BOUNDARY_CLASS(Backend);
  POLYHAL_BOUNDARY_CLASS(OptionSpec);
  POLYHAL_BOUNDARY_CLASS(Device);
  POLYHAL_BOUNDARY_CLASS(DeviceProperties);
  POLYHAL_BOUNDARY_CLASS(MemoryStats);
  POLYHAL_BOUNDARY_CLASS(MemoryItem);
  POLYHAL_BOUNDARY_CLASS(MemoryReport);
  POLYHAL_BOUNDARY_CLASS(Property);
  POLYHAL_BOUNDARY_CLASS(Kernel);
  POLYHAL_BOUNDARY_CLASS(KernelDesc);
  POLYHAL_BOUNDARY_CLASS(KernelRegistry);
  POLYHAL_BOUNDARY_CLASS(OpAttrs);
  POLYHAL_BOUNDARY_CLASS(LinearAttrs);
  POLYHAL_BOUNDARY_CLASS(LayerNormAttrs);
  POLYHAL_BOUNDARY_CLASS(AttentionAttrs);
  POLYHAL_BOUNDARY_CLASS(DropoutAttrs);
  POLYHAL_BOUNDARY_CLASS(OptimizerUpdateAttrs);
  POLYHAL_BOUNDARY_CLASS(OptimizerStep);
  POLYHAL_BOUNDARY_CLASS(Buffer);
  POLYHAL_BOUNDARY_CLASS(Tensor);
  POLYHAL_BOUNDARY_CLASS(Communicator);
  // Since ABI 3: every other class of the contract.
  POLYHAL_BOUNDARY_CLASS(MemoryAccount);
  POLYHAL_BOUNDARY_CLASS(InProcessGroup);
  POLYHAL_BOUNDARY_CLASS(DropoutMask);
  POLYHAL_BOUNDARY_CLASS(Error);
  POLYHAL_BOUNDARY_CLASS(ConfigError);
  POLYHAL_BOUNDARY_CLASS(UsageError);
  POLYHAL_BOUNDARY_CLASS(PluginError);
  POLYHAL_BOUNDARY_CLASS(DeviceUnavailableError);
  POLYHAL_BOUNDARY_CLASS(KernelNotFoundError);
  POLYHAL_BOUNDARY_CLASS(OutOfDeviceMemoryError);
  POLYHAL_BOUNDARY_CLASS(CollectiveTimeout);
  POLYHAL_BOUNDARY_CLASS(RuntimeFailure);
  POLYHAL_BOUNDARY_CLASS(ReplicaStopped);
  POLYHAL_BOUNDARY_CLASS(NoAttrs);
  POLYHAL_BOUNDARY_CLASS(MatmulAttrs);
  POLYHAL_BOUNDARY_CLASS(EmbeddingAttrs);
  POLYHAL_BOUNDARY_CLASS(RowStrideAttrs);
  POLYHAL_BOUNDARY_CLASS(OptimizerHyperParameters);
  POLYHAL_BOUNDARY_CLASS(AllReduceAttrs);
  POLYHAL_BOUNDARY_CLASS(MatMulNumerics);
  POLYHAL_BOUNDARY_CLASS(MatMulDims);
  POLYHAL_BOUNDARY_CLASS(OperandTypes);
  // Since op schema 9.
  POLYHAL_BOUNDARY_CLASS(GroupedDenseAttrs);
  POLYHAL_BOUNDARY_CLASS(SequenceConvAttrs);
  // Since ABI 5.
  POLYHAL_BOUNDARY_CLASS(CollectiveCall);
  POLYHAL_BOUNDARY_CLASS(CollectiveEngine);
#undef POLYHAL_BOUNDARY_CLASS
}

/// FNV-1a over the sizes and alignments of the boundary classes.
constexpr std::uint64_t boundary_layout_fingerprint() {
  std::uint64_t hash = 14695981039346656037ull;
  const auto mix = [&hash](std::uint64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (value >> (8 * byte)) & 0xffu;
      hash *= 1099511628211ull;
    }
  };
  for_each_boundary_class([&](const char*, std::size_t size, std::size_t align) {
    mix(size);
    mix(align);
  });
  return hash;
}

}  // namespace polyhal
