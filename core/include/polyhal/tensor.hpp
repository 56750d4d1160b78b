#pragma once
/// @file tensor.hpp
/// Device memory (Buffer) and typed views of it (Tensor).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "polyhal/dtype.hpp"

namespace polyhal {

using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for a scalar shape {}).
std::int64_t element_count(const Shape& shape) noexcept;
/// "[2, 3, 4]"
std::string shape_string(const Shape& shape);

/// Device memory, freed when the last owner lets go. Every device polyhal
/// models today keeps its storage in host memory, so `data()` is a host
/// address; a future backend with separate memory returns nullptr and is only
/// reached through Device::copy_* and its own kernels.
class Buffer {
 public:
  virtual ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  virtual void* data() noexcept = 0;
  virtual const void* data() const noexcept = 0;
  virtual std::uint64_t size_bytes() const noexcept = 0;

 protected:
  Buffer() = default;
};

/// A typed, shaped view of a whole buffer.
struct Tensor {
  std::shared_ptr<Buffer> buffer;
  DType dtype = DType::f32;
  Shape shape;

  std::int64_t numel() const noexcept { return element_count(shape); }
  std::uint64_t bytes() const noexcept {
    return static_cast<std::uint64_t>(numel()) * dtype_size(dtype);
  }
  template <class T>
  T* data() const noexcept {
    return static_cast<T*>(buffer->data());
  }
};

/// Rows [begin, begin + count) of a tensor's outermost dimension, sharing its
/// memory (and keeping it alive). Used to address Q, K and V inside a fused
/// projection without copies.
Tensor row_slice(const Tensor& tensor, std::int64_t begin, std::int64_t count);

}  // namespace polyhal
