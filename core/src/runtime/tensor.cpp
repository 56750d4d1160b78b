#include "polyhal/tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

namespace polyhal {

Buffer::~Buffer() = default;

namespace {

/// A window into another buffer.
class BufferView final : public Buffer {
 public:
  BufferView(std::shared_ptr<Buffer> parent, std::uint64_t offset, std::uint64_t size)
      : parent_(std::move(parent)), offset_(offset), size_(size) {}
  void* data() noexcept override { return static_cast<char*>(parent_->data()) + offset_; }
  const void* data() const noexcept override {
    return static_cast<const char*>(parent_->data()) + offset_;
  }
  std::uint64_t size_bytes() const noexcept override { return size_; }

 private:
  std::shared_ptr<Buffer> parent_;
  std::uint64_t offset_, size_;
};

}  // namespace

Tensor row_slice(const Tensor& tensor, std::int64_t begin, std::int64_t count) {
  if (tensor.shape.empty() || begin < 0 || count < 0 || begin + count > tensor.shape[0]) {
    throw std::out_of_range(fmt::format("row_slice [{}, {}) of a tensor of shape {}", begin,
                                        begin + count, shape_string(tensor.shape)));
  }
  const auto row_bytes =
      static_cast<std::uint64_t>(tensor.numel() / tensor.shape[0]) * dtype_size(tensor.dtype);
  Tensor view;
  view.dtype = tensor.dtype;
  view.shape = tensor.shape;
  view.shape[0] = count;
  view.buffer =
      std::make_shared<BufferView>(tensor.buffer, static_cast<std::uint64_t>(begin) * row_bytes,
                                   static_cast<std::uint64_t>(count) * row_bytes);
  return view;
}

std::int64_t element_count(const Shape& shape) noexcept {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace polyhal
