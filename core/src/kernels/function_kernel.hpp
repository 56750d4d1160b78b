#pragma once
// A training kernel whose run is a function of its tensors, and the small
// helpers the reference training kernels share (the ops are small enough
// that a class each would only add ceremony).
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "polyhal/error.hpp"
#include "polyhal/kernel.hpp"
#include "polyhal/parallel.hpp"

namespace polyhal::detail {

using Body = std::function<void(std::span<const Tensor>, std::span<const Tensor>)>;

/// A kernel whose run is a function of its f32 (and integer) tensors.
class FunctionKernel final : public Kernel {
 public:
  FunctionKernel(std::string name, double flops, Body body)
      : name_(std::move(name)), flops_(flops), body_(std::move(body)) {}
  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    for (const auto& t : inputs) require_f32(t);
    for (const auto& t : outputs) require_f32(t);
    body_(inputs, outputs);
  }
  std::string implementation() const override { return "reference " + name_; }
  double flops() const override { return flops_; }

 private:
  void require_f32(const Tensor& t) const {
    if (t.dtype != DType::f32 && t.dtype != DType::i32 && t.dtype != DType::i64) {
      throw RuntimeFailure(
          fmt::format("reference {} trains in f32, got a {} tensor", name_, dtype_name(t.dtype)));
    }
  }
  std::string name_;
  double flops_;
  Body body_;
};

inline float* f(const Tensor& t) {
  return t.data<float>();
}
inline const std::int32_t* ints(const Tensor& t) {
  return t.data<std::int32_t>();
}
inline std::size_t n(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

/// fn(i) for every i in [0, count), on the kernel library's pool.
template <class Fn>
void rows(const ParallelFor& parallel, std::int64_t count, Fn fn) {
  parallel(count, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) fn(n(i));
  });
}

}  // namespace polyhal::detail
