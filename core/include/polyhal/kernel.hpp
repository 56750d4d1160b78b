#pragma once
/// @file kernel.hpp
/// Kernels: one operation on device tensors, prepared once for fixed shapes.
///
/// Ops implemented so far (inputs -> outputs):
///   "matmul": A[M,K], B[K,N] -> C[M,N]. Inputs have `dtype`; C has the
///             attribute "out_dtype" (default: dtype). Accumulation is f32
///             unless the device documents otherwise (IPU "partials": f16).
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "polyhal/dtype.hpp"
#include "polyhal/tensor.hpp"

namespace polyhal {

class Device;

/// What to prepare: op name, element type and fixed input shapes.
struct KernelDesc {
  std::string op;
  DType dtype = DType::f32;
  std::vector<Shape> input_shapes;
  std::map<std::string, std::string> attrs;

  /// attrs[key] or `fallback`.
  std::string attr(const std::string& key, const std::string& fallback) const;
  /// "matmul bf16 [128, 64] x [64, 32]"
  std::string to_string() const;
};

/// A kernel prepared for one KernelDesc. Preparation did the expensive work
/// (primitive creation, weight packing); `run` only executes.
class Kernel {
 public:
  virtual ~Kernel();
  /// Runs on tensors of exactly the prepared shapes and dtypes.
  virtual void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) = 0;
  /// Which implementation runs, e.g. "onednn brg:avx512_core_bf16" or "reference f32".
  virtual std::string implementation() const = 0;
  /// Scratch memory the kernel holds, for memory reports.
  virtual std::uint64_t workspace_bytes() const { return 0; }
  /// Number of floating-point operations of one run (for GFLOP/s).
  virtual double flops() const { return 0.0; }
};

using KernelFactory = std::function<std::unique_ptr<Kernel>(const KernelDesc&, Device&)>;

/// Per-device table of kernels by (op, dtype). Filled by the plugin when it
/// opens a device; read by the core at prepare time.
class KernelRegistry {
 public:
  void add(const std::string& op, DType dtype, KernelFactory factory);
  /// nullptr if there is no such kernel.
  const KernelFactory* find(const std::string& op, DType dtype) const;
  /// The dtypes for which `op` has a kernel (empty if none).
  std::vector<DType> dtypes_for(const std::string& op) const;
  /// All registered op names.
  std::vector<std::string> ops() const;

 private:
  std::map<std::pair<std::string, DType>, KernelFactory> factories_;
};

}  // namespace polyhal
