#include "polyhal/app/tensor_limit.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace polyhal {

TensorTooLargeError::TensorTooLargeError(const std::string& tensor,
                                         std::span<const std::int64_t> shape)
    : ConfigError(fmt::format(
          "tensor '{}' [{}] would hold more than {} elements, the most one kernel indexes "
          "(oneDNN uses 32-bit offsets)",
          tensor, fmt::join(shape, ", "), kMaxTensorElements)) {}

TensorTooLargeError::~TensorTooLargeError() = default;

std::int64_t bounded_element_count(std::span<const std::int64_t> shape) {
  std::int64_t count = 1;
  for (const std::int64_t d : shape) {
    if (d < 0) return -1;
    if (__builtin_mul_overflow(count, d, &count) || count > kMaxTensorElements) return -1;
  }
  return count;
}

void check_tensor_size(const std::string& tensor, std::span<const std::int64_t> shape) {
  if (bounded_element_count(shape) < 0) throw TensorTooLargeError(tensor, shape);
}

}  // namespace polyhal
