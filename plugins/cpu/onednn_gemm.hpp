#pragma once
// Pieces the CPU training kernels share: a oneDNN matmul over buffers given
// by pointer at run time (any strides the memory descriptors describe), and
// bf16 operand scratch for mixed precision.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "omp_convert.hpp"
#include "polyhal/dtype.hpp"

namespace polyhal::cpu {

/// C = A B (+ bias row, or += C with `accumulate`), created once; run()
/// rebinds the data pointers and executes.
struct Gemm {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
  dnnl::memory a, b, c, bias, scratchpad;
  std::unordered_map<int, dnnl::memory> args;

  /// `attr` may carry output scales and post-ops; its scratchpad mode is set
  /// to user here. Throws dnnl::error when oneDNN has no implementation.
  Gemm(const dnnl::engine& engine, const dnnl::memory::desc& a_md, const dnnl::memory::desc& b_md,
       const dnnl::memory::desc& c_md, bool accumulate, bool with_bias = false,
       dnnl::primitive_attr attr = {});
  void run(dnnl::stream& stream, const void* pa, const void* pb, void* pc,
           const float* pbias = nullptr);
  /// run() with extra arguments (post-op inputs).
  void run(dnnl::stream& stream, const void* pa, const void* pb, void* pc,
           const std::unordered_map<int, dnnl::memory>& extra);
};

/// bf16 operand scratch sized at prepare; of() narrows f32 values into it.
/// For f32 it holds nothing and of() returns the values themselves.
class Operand {
 public:
  Operand(DType type, std::int64_t count)
      : bits_(type == DType::bf16 ? static_cast<std::size_t>(count) : 0) {}
  const void* of(const float* values) {
    if (bits_.empty()) return values;
    to_bf16(values, bits_.data(), static_cast<std::int64_t>(bits_.size()));
    return bits_.data();
  }
  /// The scratch itself (bf16 only), for producers that write bf16 directly.
  std::uint16_t* bits() { return bits_.data(); }

 private:
  std::vector<std::uint16_t> bits_;
};

/// bf16 for a bf16 compute type, f32 otherwise.
inline dnnl::memory::data_type operand_type(DType type) {
  return type == DType::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

}  // namespace polyhal::cpu
