#include "polyhal/tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace polyhal {

Buffer::~Buffer() = default;

std::int64_t element_count(const Shape& shape) noexcept {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace polyhal
