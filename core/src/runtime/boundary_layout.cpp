// Pins the size of every boundary class on the reference platform (x86-64,
// libstdc++): changing one fails the build here until kAbiMajor is bumped,
// docs/abi-changelog.md records it, and the numbers below are updated.
#include "polyhal/boundary_layout.hpp"

#include "polyhal/abi.hpp"

namespace polyhal {
#if defined(__x86_64__) && defined(__GLIBCXX__) && _GLIBCXX_USE_CXX11_ABI
static_assert(kAbiMajor == 8, "new ABI: update the sizes below for it");
static_assert(sizeof(Backend) == 24, "Backend changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(OptionSpec) == 128, "OptionSpec changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Device) == 368, "Device changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(DeviceProperties) == 264,
              "DeviceProperties changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(MemoryStats) == 32, "MemoryStats changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(MemoryItem) == 72, "MemoryItem changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(MemoryReport) == 104, "MemoryReport changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Property) == 104, "Property changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Kernel) == 8, "Kernel changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(KernelDesc) == 96, "KernelDesc changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(KernelRegistry) == 48,
              "KernelRegistry changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(OpAttrs) == 56, "OpAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(LinearAttrs) == 16, "LinearAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(LayerNormAttrs) == 16,
              "LayerNormAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(AttentionAttrs) == 48,
              "AttentionAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(DropoutAttrs) == 16, "DropoutAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(OptimizerUpdateAttrs) == 48,
              "OptimizerUpdateAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(OptimizerStep) == 32,
              "OptimizerStep changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Buffer) == 8, "Buffer changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Tensor) == 48, "Tensor changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Communicator) == 48, "Communicator changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(CollectiveCall) == 120,
              "CollectiveCall changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(CollectiveEngine) == 8,
              "CollectiveEngine changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(MemoryAccount) == 24,
              "MemoryAccount changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(InProcessGroup) == 8,
              "InProcessGroup changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(DropoutMask) == 24, "DropoutMask changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Error) == 24, "Error changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(ConfigError) == 24, "ConfigError changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(UsageError) == 24, "UsageError changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(PluginError) == 24, "PluginError changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(DeviceUnavailableError) == 24,
              "DeviceUnavailableError changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(KernelNotFoundError) == 24,
              "KernelNotFoundError changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(OutOfDeviceMemoryError) == 24,
              "OutOfDeviceMemoryError changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(CollectiveTimeout) == 24,
              "CollectiveTimeout changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(RuntimeFailure) == 24,
              "RuntimeFailure changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(ReplicaStopped) == 24,
              "ReplicaStopped changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(NoAttrs) == 1, "NoAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(MatmulAttrs) == 2, "MatmulAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(EmbeddingAttrs) == 8,
              "EmbeddingAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(RowStrideAttrs) == 8,
              "RowStrideAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(OptimizerHyperParameters) == 40,
              "OptimizerHyperParameters changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(AllReduceAttrs) == 8,
              "AllReduceAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(GroupedDenseAttrs) == 8,
              "GroupedDenseAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(SequenceConvAttrs) == 32,
              "SequenceConvAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(RotaryAttrs) == 24, "RotaryAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(MatMulNumerics) == 16,
              "MatMulNumerics changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(MatMulDims) == 24, "MatMulDims changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(OperandTypes) == 72, "OperandTypes changed layout: bump kAbiMajor (abi.hpp)");
#endif
}  // namespace polyhal
