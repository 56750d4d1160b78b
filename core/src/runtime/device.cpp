#include "polyhal/device.hpp"

#include "polyhal/backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include "polyhal/app/tensor_limit.hpp"
#include "polyhal/error.hpp"
#include "runtime/plugin_call.hpp"
#include "util/format.hpp"

namespace polyhal {
namespace {

constexpr std::uint64_t kAlignment = 64;  // a cache line; what oneDNN and AVX-512 want

/// 64-byte aligned host memory.
class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(std::uint64_t bytes) : size_(bytes) {
    const std::uint64_t rounded =
        std::max<std::uint64_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    data_ = std::aligned_alloc(kAlignment, rounded);
    if (data_ == nullptr) {
      throw OutOfDeviceMemoryError(
          fmt::format("host allocation of {} failed", detail::human_bytes(bytes)));
    }
  }
  ~HostBuffer() override { std::free(data_); }
  void* data() noexcept override { return data_; }
  const void* data() const noexcept override { return data_; }
  std::uint64_t size_bytes() const noexcept override { return size_; }

 private:
  void* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace

std::string_view device_mode_name(DeviceMode mode) noexcept {
  return mode == DeviceMode::hardware ? "hardware" : "model";
}

std::string_view precision_support_name(PrecisionSupport support) noexcept {
  switch (support) {
    case PrecisionSupport::native:
      return "native";
    case PrecisionSupport::emulated:
      return "emulated";
    case PrecisionSupport::none:
      return "no";
  }
  return "?";
}

PrecisionMode precision_mode(const DeviceProperties& properties, std::string_view precision) {
  for (const PrecisionMode& mode : properties.precisions)
    if (mode.precision == precision) return mode;
  // bf32 is f32 tensors with bf16 products: native where bf16 is.
  const bool bf32 = precision == "bf32";
  const auto type = bf32 ? std::optional<DType>(DType::bf16) : parse_dtype(precision);
  const bool listed = precision != "int8" && type &&
                      std::find(properties.dtypes.begin(), properties.dtypes.end(), *type) !=
                          properties.dtypes.end();
  std::string why =
      listed ? fmt::format("computes in {}", dtype_name(*type))
             : fmt::format("does not compute in {}", type ? dtype_name(*type) : precision);
  if (bf32) why += " (bf32: f32 tensors, bf16 products)";
  return {std::string(precision), listed ? PrecisionSupport::native : PrecisionSupport::none, why};
}

Device::Device(DeviceProperties properties) : properties_(std::move(properties)) {}
Device::~Device() = default;

bool Device::supports(DType type) const noexcept {
  return std::find(properties_.dtypes.begin(), properties_.dtypes.end(), type) !=
         properties_.dtypes.end();
}

std::shared_ptr<Buffer> Device::allocate(std::uint64_t bytes, const std::string& purpose) {
  const std::uint64_t capacity = properties_.memory_capacity_bytes;
  std::uint64_t in_use = account_->in_use.load();
  do {
    if (bytes > capacity || in_use > capacity - bytes) {
      throw OutOfDeviceMemoryError(
          fmt::format("{}: cannot allocate {} for '{}': {} of {} already in use, {} free", name(),
                      detail::human_bytes(bytes), purpose, detail::human_bytes(in_use),
                      detail::human_bytes(capacity),
                      detail::human_bytes(capacity - std::min(capacity, in_use))));
    }
  } while (!account_->in_use.compare_exchange_weak(in_use, in_use + bytes));
  std::uint64_t peak = account_->peak.load();
  while (in_use + bytes > peak && !account_->peak.compare_exchange_weak(peak, in_use + bytes)) {
  }
  ++account_->live;

  std::unique_ptr<Buffer> raw;
  try {
    raw = do_allocate(bytes);
  } catch (...) {
    account_->in_use -= bytes;
    --account_->live;
    throw;
  }
  // The deleter returns the bytes and keeps the plugin loaded until the
  // buffer (whose code may live in the plugin) is gone.
  Buffer* pointer = raw.release();
  return std::shared_ptr<Buffer>(pointer,
                                 [account = account_, anchor = library_anchor_, bytes](Buffer* b) {
                                   delete b;
                                   account->in_use -= bytes;
                                   --account->live;
                                 });
}

Tensor Device::allocate_tensor(DType type, const Shape& shape, const std::string& purpose) {
  for (auto d : shape) {
    if (d < 0)
      throw RuntimeFailure(fmt::format("{}: negative dimension in shape {} for '{}'", name(),
                                       shape_string(shape), purpose));
  }
  Tensor t;
  t.dtype = type;
  t.shape = shape;
  t.buffer = allocate(t.bytes(), purpose);
  return t;
}

void Device::copy_from_host(Buffer& dst, const void* src, std::uint64_t bytes,
                            std::uint64_t offset) {
  if (offset > dst.size_bytes() || bytes > dst.size_bytes() - offset) {
    throw RuntimeFailure(fmt::format("{}: copy of {} bytes at offset {} overruns a {}-byte buffer",
                                     name(), bytes, offset, dst.size_bytes()));
  }
  std::memcpy(static_cast<char*>(dst.data()) + offset, src, bytes);
}

void Device::copy_to_host(void* dst, const Buffer& src, std::uint64_t bytes, std::uint64_t offset) {
  if (offset > src.size_bytes() || bytes > src.size_bytes() - offset) {
    throw RuntimeFailure(fmt::format("{}: copy of {} bytes at offset {} overruns a {}-byte buffer",
                                     name(), bytes, offset, src.size_bytes()));
  }
  std::memcpy(dst, static_cast<const char*>(src.data()) + offset, bytes);
}

MemoryStats Device::memory_stats() const noexcept {
  return {properties_.memory_capacity_bytes, account_->in_use.load(), account_->peak.load(),
          account_->live.load()};
}

std::shared_ptr<Kernel> Device::prepare_kernel(const KernelDesc& desc) {
  check_kernel(desc);
  // No hardware kernel is asked for an operand its 32-bit indexing cannot
  // reach (a matmul's product too, which no input shows). A device model
  // only plans and estimates.
  if (properties_.mode != DeviceMode::model) {
    for (std::size_t k = 0; k < desc.input_shapes.size(); ++k)
      check_tensor_size(fmt::format("{} input {}", op_name(desc.op), k), desc.input_shapes[k]);
    if (desc.op == OpKind::matmul && desc.input_shapes.size() == 2 &&
        desc.input_shapes[0].size() == 2 && desc.input_shapes[1].size() == 2) {
      const std::array<std::int64_t, 2> product{desc.input_shapes[0][0], desc.input_shapes[1][1]};
      check_tensor_size("matmul output", product);
    }
  }
  auto kernel =
      detail::call_into_plugin([&] { return (*kernels_.find(desc.op, desc.dtype))(desc, *this); },
                               fmt::format("{}: preparing a {} kernel", name(), op_name(desc.op)),
                               "the '" + properties_.backend + "'", this);
  return anchor_to_library(std::move(kernel), library_anchor_);
}

void Device::check_kernel(const KernelDesc& desc) const {
  desc.check_attrs();
  if (kernels_.find(desc.op, desc.dtype) == nullptr) {
    std::string available;
    for (DType t : kernels_.dtypes_for(desc.op)) {
      available += (available.empty() ? "" : ", ") + std::string(dtype_name(t));
    }
    std::string message =
        available.empty()
            ? fmt::format("{} ({}) has no kernel for op '{}'", name(), properties_.backend,
                          op_name(desc.op))
            : fmt::format("{} ({}) has no '{}' kernel for dtype {}; it has: {}", name(),
                          properties_.backend, op_name(desc.op), dtype_name(desc.dtype), available);
    const std::string advice = kernel_advice(desc);
    if (!advice.empty()) message += ". " + advice;
    throw KernelNotFoundError(message);
  }
}

MemoryReport Device::plan_memory(const std::vector<MemoryItem>& items) const {
  MemoryReport report;
  report.device = name();
  report.capacity_bytes = properties_.memory_capacity_bytes;
  report.items = items;
  for (const auto& item : items) report.required_bytes += item.bytes;
  report.fits = report.required_bytes <= report.capacity_bytes;
  if (!report.fits) {
    report.notes.push_back(
        fmt::format("needs {} more than the {} available",
                    detail::human_bytes(report.required_bytes - report.capacity_bytes),
                    detail::human_bytes(report.capacity_bytes)));
  }
  return report;
}

std::optional<double> Device::estimate_seconds(const KernelDesc&) const {
  return std::nullopt;
}

std::unique_ptr<Buffer> Device::do_allocate(std::uint64_t bytes) {
  return std::make_unique<HostBuffer>(bytes);
}

std::string Device::kernel_advice(const KernelDesc&) const {
  return {};
}

}  // namespace polyhal
