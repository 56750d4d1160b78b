#pragma once
/// @file tensor_limit.hpp
/// The largest tensor a program may declare. oneDNN indexes some of its
/// kernels with 32-bit integers (a larger matmul dimension ends in SIGFPE),
/// so every tensor, and every matmul operand, holds fewer than 2^31
/// elements. A program over it is refused when it is declared, before any
/// kernel sees it; the launcher names the config key that made it.
#include <cstdint>
#include <span>
#include <string>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/error.hpp"

namespace polyhal {

inline constexpr std::int64_t kMaxTensorElements = (std::int64_t{1} << 31) - 1;

/// A tensor of `shape` would hold more than kMaxTensorElements.
class TensorTooLargeError : public ConfigError {
 public:
  TensorTooLargeError(const std::string& tensor, std::span<const std::int64_t> shape);
  ~TensorTooLargeError() override;
};

/// The elements of `shape`, or -1 when they exceed kMaxTensorElements
/// (checked, so no product overflows).
std::int64_t bounded_element_count(std::span<const std::int64_t> shape);

/// Throws TensorTooLargeError naming `tensor` when `shape` is over the limit.
void check_tensor_size(const std::string& tensor, std::span<const std::int64_t> shape);

}  // namespace polyhal
