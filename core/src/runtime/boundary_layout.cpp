// Pins the size of every boundary class on the reference platform (x86-64,
// libstdc++): changing one fails the build here until kAbiMajor is bumped,
// docs/abi-changelog.md records it, and the numbers below are updated.
#include "polyhal/boundary_layout.hpp"

#include "polyhal/abi.hpp"

namespace polyhal {
#if defined(__x86_64__) && defined(__GLIBCXX__) && _GLIBCXX_USE_CXX11_ABI
static_assert(kAbiMajor == 2, "new ABI: update the sizes below for it");
static_assert(sizeof(Backend) == 24, "Backend changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(OptionSpec) == 128, "OptionSpec changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Device) == 328, "Device changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(DeviceProperties) == 240,
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
static_assert(sizeof(AttentionAttrs) == 40,
              "AttentionAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(DropoutAttrs) == 16, "DropoutAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(OptimizerUpdateAttrs) == 48,
              "OptimizerUpdateAttrs changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(OptimizerStep) == 32,
              "OptimizerStep changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Buffer) == 8, "Buffer changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Tensor) == 48, "Tensor changed layout: bump kAbiMajor (abi.hpp)");
static_assert(sizeof(Communicator) == 8, "Communicator changed layout: bump kAbiMajor (abi.hpp)");
#endif
}  // namespace polyhal
