#pragma once
/// @file device.hpp
/// Device: what a backend can do and hold.
///
/// A Device is opened by a Backend and owned through std::shared_ptr; objects
/// it hands out (buffers, kernels) keep the plugin library loaded for as long
/// as they live. Work is *prepared once, run many*: `prepare_kernel` makes
/// every expensive decision for fixed shapes; Kernel::run only executes.
/// `plan_memory` answers "will it fit, and where does memory go" without
/// allocating, which is what `--compile-only` prints.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "polyhal/collective.hpp"
#include "polyhal/dtype.hpp"
#include "polyhal/kernel.hpp"
#include "polyhal/property.hpp"
#include "polyhal/tensor.hpp"

namespace polyhal {

/// `hardware`: runs on the real thing. `model`: a device model executing on the
/// host with the target's rules; its speeds are estimates.
enum class DeviceMode { hardware, model };
std::string_view device_mode_name(DeviceMode mode) noexcept;

/// How a device runs one form of `model.precision`.
enum class PrecisionSupport {
  native,    ///< on instructions made for it: the fast path
  emulated,  ///< runs, but through conversions or wider math: slower than it should be
  none,      ///< refused (the reason says why)
};
std::string_view precision_support_name(PrecisionSupport support) noexcept;

/// One form of `model.precision` ("f32", "bf16", "f16", "bf32", "int8") on
/// one device, for the precision policy and `polyhal devices`.
struct PrecisionMode {
  std::string precision;
  PrecisionSupport support = PrecisionSupport::none;
  std::string why;  ///< what it runs on; for emulated, the cost and the better choice
};

/// Fixed facts about a device. Every figure in `table` says where it comes from.
struct DeviceProperties {
  std::string name;     ///< "cpu0", "ipu3", "hpu0"
  std::string backend;  ///< plugin name
  std::string vendor;
  std::string product;  ///< "GC200 Mk2 IPU (in IPU-POD16)", "Intel Xeon ..."
  DeviceMode mode = DeviceMode::hardware;
  std::vector<DType> dtypes;  ///< compute dtypes the device supports
  std::uint64_t memory_capacity_bytes = 0;
  std::map<DType, double> peak_flops;  ///< FLOP/s per dtype (see table for provenance)
  std::vector<Property> table;         ///< everything, for `polyhal devices`
  /// How each precision runs (since ABI 6). A precision not listed is
  /// native when its dtype is in `dtypes`, else none: device models that
  /// compute each dtype they list at full speed need not fill it.
  std::vector<PrecisionMode> precisions;
};

/// `precision` on the device `properties` describes: its entry in
/// `properties.precisions`, else derived from `dtypes` as that field says.
PrecisionMode precision_mode(const DeviceProperties& properties, std::string_view precision);

/// Live memory counters.
struct MemoryStats {
  std::uint64_t capacity_bytes = 0;
  std::uint64_t in_use_bytes = 0;
  std::uint64_t peak_bytes = 0;
  std::uint64_t live_allocations = 0;
};

/// One line of a memory plan: what, how much, and which category it counts
/// under ("weights", "activations", "workspace", ...).
struct MemoryItem {
  std::string category;
  std::string name;
  std::uint64_t bytes = 0;
};

/// Result of planning memory for a workload on one device.
struct MemoryReport {
  std::string device;
  std::uint64_t capacity_bytes = 0;  ///< what the workload may use
  std::uint64_t required_bytes = 0;
  bool fits = true;
  std::vector<MemoryItem> items;
  std::vector<std::string> notes;  ///< device-specific detail and advice
};

/// Shared accounting between a device and the buffers it allocated, so a
/// buffer that outlives its device still returns its bytes safely.
struct MemoryAccount {
  std::atomic<std::uint64_t> in_use{0};
  std::atomic<std::uint64_t> peak{0};
  std::atomic<std::uint64_t> live{0};
};

class Device {
 public:
  virtual ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceProperties& properties() const noexcept { return properties_; }
  const std::string& name() const noexcept { return properties_.name; }
  bool supports(DType type) const noexcept;

  /// Allocates `bytes` of device memory. Throws OutOfDeviceMemoryError naming
  /// the device, the request and what is in use when capacity would be exceeded.
  std::shared_ptr<Buffer> allocate(std::uint64_t bytes, const std::string& purpose);
  /// Allocates a tensor of `shape` elements of `type`.
  Tensor allocate_tensor(DType type, const Shape& shape, const std::string& purpose);
  /// Host -> device and device -> host copies with bounds checks.
  void copy_from_host(Buffer& dst, const void* src, std::uint64_t bytes, std::uint64_t offset = 0);
  void copy_to_host(void* dst, const Buffer& src, std::uint64_t bytes, std::uint64_t offset = 0);
  MemoryStats memory_stats() const noexcept;

  /// The kernels this device implements.
  const KernelRegistry& kernels() const noexcept { return kernels_; }
  /// Prepares a kernel for fixed shapes. Throws KernelNotFoundError (with the
  /// dtypes that do exist, and the device's advice) if there is none.
  std::shared_ptr<Kernel> prepare_kernel(const KernelDesc& desc);
  /// The checks of prepare_kernel without preparing anything (plan time,
  /// `--compile-only`, `validate`): the desc's attributes are its op's, and
  /// the device has a kernel for (op, dtype); throws as prepare_kernel does.
  void check_kernel(const KernelDesc& desc) const;

  /// Plans memory for `items` without allocating. The default compares the
  /// sum with capacity; device models add their own rules and advice.
  virtual MemoryReport plan_memory(const std::vector<MemoryItem>& items) const;
  /// Estimated device time of one run of `desc` in seconds, from the device's
  /// performance model; nullopt where the device is real (measure it instead).
  virtual std::optional<double> estimate_seconds(const KernelDesc& desc) const;
  /// Waits until submitted work has finished (host-synchronous devices: no-op).
  virtual void synchronize() {}
  /// The engine its backend runs collectives with, shared by every device
  /// the backend opened together; nullptr when the backend has none.
  const std::shared_ptr<CollectiveEngine>& collective_engine() const noexcept {
    return collective_engine_;
  }

 protected:
  explicit Device(DeviceProperties properties);
  KernelRegistry& registry() noexcept { return kernels_; }
  /// Raw allocation; the default gives 64-byte aligned host memory.
  virtual std::unique_ptr<Buffer> do_allocate(std::uint64_t bytes);
  /// Extra sentence for KernelNotFoundError, e.g. "the IPU has no bf16: use f16".
  virtual std::string kernel_advice(const KernelDesc& desc) const;

 private:
  friend class Backend;
  DeviceProperties properties_;
  KernelRegistry kernels_;
  std::shared_ptr<MemoryAccount> account_ = std::make_shared<MemoryAccount>();
  std::shared_ptr<const void> library_anchor_;  // keeps the plugin loaded
  std::shared_ptr<CollectiveEngine> collective_engine_;
};

}  // namespace polyhal
