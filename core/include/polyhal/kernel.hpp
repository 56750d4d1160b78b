#pragma once
/// @file kernel.hpp
/// Kernels: one operation on device tensors, prepared once for fixed shapes.
///
/// Inference ops (inputs; constants bound once with set_constants -> outputs),
/// with their attribute structs from op_schema.hpp. `dtype` is the element
/// type of activations and weights. Accumulation is f32 unless the device
/// documents otherwise (IPU partials).
///   matmul:    A[M,K], B[K,N] -> C[M,N]; MatmulAttrs (out_dtype, default dtype)
///   linear:    X[M,K] [, R[M,N] when residual]; W[N,K] (Hugging Face
///              layout), b[N] (f32) -> Y = act(X W^T + b) [+ R], [M,N];
///              LinearAttrs (out_features, activation none | gelu (exact erf) | tanh);
///              an int8 linear with dynamic s8 input may take a third
///              constant, the smoothing s[K] (f32, int8.hpp)
///   layernorm: X[M,H] [, R[M,H] when residual: normalises X+R]; gamma[H],
///              beta[H] (f32) -> Y[M,H]; LayerNormAttrs (eps, residual)
///   attention: QKV[B*S, 3H] (q, k, v blocks side by side), mask[B,S] (i32:
///              0 padding, else the token's sequence within its row: 1 for
///              every token of an unpacked row, 1..K in a packed one) ->
///              context[B*S, H]; AttentionAttrs (batch, seq, heads).
///              softmax(q k^T / sqrt(d)) v per head over the keys
///              attention_allows(mask[query], mask[key]) admits (and,
///              with AttentionAttrs::window > 0, at most window rows away).
///   relative_attention: attention's inputs and buckets[B,S,S] (i32, the
///              bucket of key j for query i of row b, each below the
///              table's rows); bias[NB, heads] (f32 constant) -> context as
///              attention, with bias[buckets[b,i,j], head] added to each
///              scaled score (MPNet's relative-position bias).
///   embedding: ids[B*S], token_types[B*S] [, position_ids[B*S]] (i32);
///              word[V,H], position[P,H], type[T,H] -> word[id] +
///              position[s] + type[t] as [B*S, H], s the token's index in its
///              row, or its position id (packed rows); EmbeddingAttrs (seq)
///   take_rows: X[R,H] -> Y[R/stride, H], rows 0, stride, 2*stride, ...;
///              RowStrideAttrs (stride)
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "polyhal/dtype.hpp"
#include "polyhal/op_schema.hpp"
#include "polyhal/tensor.hpp"

namespace polyhal {

class Device;

/// The attention mask's rule: a key is attended when it is not padding and,
/// unless the query is padding, belongs to the query's sequence. For an
/// unpacked row (mask 1 or 0) this is Hugging Face's padding mask; packed
/// sequences never see each other.
constexpr bool attention_allows(std::int32_t query, std::int32_t key) noexcept {
  return key != 0 && (query == 0 || key == query);
}

/// What to prepare: op, element type, fixed input shapes and the op's
/// attribute struct (op_schema.hpp). Device::prepare_kernel refuses a desc
/// whose attrs are not the struct its op takes.
struct KernelDesc {
  OpKind op = OpKind::matmul;
  DType dtype = DType::f32;
  std::vector<Shape> input_shapes;
  OpAttrs attrs;
  /// Mixed precision on f32 training ops: the precision the op holds its
  /// activation outputs at (f32 math inside); f32 = no rounding.
  DType round_to = DType::f32;
  /// Training GEMMs (dense, dense_backward) of f32 tensors: the type their
  /// operands are rounded to before the products, accumulated in f32. bf16
  /// is bf32 training (model.precision bf32, as oneDNN's fpmath_mode bf16);
  /// f32 multiplies exactly.
  DType products = DType::f32;

  /// The attribute struct; throws RuntimeFailure naming the op if `attrs`
  /// holds another one.
  template <class Attrs>
  const Attrs& attrs_as() const {
    if (const Attrs* a = std::get_if<Attrs>(&attrs)) return *a;
    throw_attrs_mismatch(OpAttrs(Attrs{}).index());
  }
  /// matmul's out_dtype, or `dtype`.
  DType out_dtype() const;
  /// "matmul bf16 [128, 64] x [64, 32]"
  std::string to_string() const;
  /// Throws RuntimeFailure unless `attrs` is the struct `op` takes.
  void check_attrs() const;
  /// Same op, dtype, shapes, attributes and rounding: one kernel serves both.
  bool operator==(const KernelDesc&) const = default;

 private:
  [[noreturn]] void throw_attrs_mismatch(std::size_t wanted) const;
};

/// A kernel prepared for one KernelDesc. Preparation did the expensive work
/// (primitive creation, weight packing); `run` only executes.
class Kernel {
 public:
  virtual ~Kernel();
  /// Binds the op's constants (weights) once, after prepare and before the
  /// first run; a kernel may pack them into its preferred layout here.
  /// The default accepts none.
  virtual void set_constants(std::span<const Tensor> constants);
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
  void add(OpKind op, DType dtype, KernelFactory factory);
  /// nullptr if there is no such kernel.
  const KernelFactory* find(OpKind op, DType dtype) const;
  /// The dtypes for which `op` has a kernel (empty if none).
  std::vector<DType> dtypes_for(OpKind op) const;
  /// All registered ops, in enum order.
  std::vector<OpKind> ops() const;

 private:
  std::map<std::pair<OpKind, DType>, KernelFactory> factories_;
};

}  // namespace polyhal
