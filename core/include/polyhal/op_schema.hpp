#pragma once
/// @file op_schema.hpp
/// The typed op schema: every op a Kernel can implement is an OpKind, and
/// each OpKind takes exactly one attribute struct (OpAttrs holds it). Nothing
/// numeric passes through a string: a kernel reads its attributes with
/// `desc.attrs_as<LinearAttrs>()`.
///
/// The schema is versioned apart from the C++ ABI (kOpSchemaVersion, carried
/// in the plugin descriptor): the enum's values and each op's attributes and
/// tensor contract are what a plugin's kernels were written against. The host
/// accepts only a plugin built with the same op-schema version, before any
/// object crosses (docs/abi-changelog.md lists the versions).
///
/// Tensor contracts of the inference ops are in kernel.hpp, of the training
/// ops in train_kernels.hpp.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "polyhal/dtype.hpp"

namespace polyhal {

/// Version of the op schema below. Bump it whenever an OpKind is added,
/// removed or reordered, an attribute struct changes, or an op's tensor
/// contract changes; record the change in docs/abi-changelog.md.
/// 1: string op names with string attributes (ABI 1.x). 2: typed ops.
/// 3: mixed-precision activations stored at bf16/f16 (train_kernels.hpp
/// operand_types) and the `cast` op. 4: the fine-tuning losses span_loss,
/// classification_loss and regression_loss. 5: the cost-only host_transfer;
/// OptimizerUpdateAttrs::first_moment (f16 m); attention masks as sequence
/// numbers (packed rows, attention_allows in kernel.hpp). 6: the mask as
/// attention_backward's last input; optional position ids in embedding and
/// the mask in span_loss (packed rows). 7: LinearAttrs::math and
/// input_scale (int8 linears, static or dynamic; bf32 linears). 9: GroupBERT's
/// grouped_dense, sequence_conv, glu and swish with their backward ops.
/// 10: relu and relu_backward, and Activation::relu in linear's epilogue
/// (DistilBERT's classification head); relative_attention (MPNet's
/// bucketed relative-position bias added to the scores). 11: AttentionAttrs::window
/// (ModernBERT's sliding-window layers), rotary and geglu with their backward
/// ops, relative_attention_train and relative_attention_backward (MPNet
/// fine-tuning), mean_pool and mean_pool_backward.
inline constexpr std::uint32_t kOpSchemaVersion = 11;

/// Every op of the schema. Values are part of the op schema: append only
/// together with a kOpSchemaVersion bump.
enum class OpKind : std::uint16_t {
  // Inference (kernel.hpp): weights bound once as constants.
  matmul,
  linear,
  layernorm,
  attention,
  embedding,
  take_rows,
  // Training (train_kernels.hpp): weights are run inputs.
  dense,
  dense_backward,
  gelu,
  gelu_backward,
  tanh,
  tanh_backward,
  add,
  layernorm_train,
  layernorm_backward,
  attention_train,
  attention_backward,
  embedding_train,
  embedding_backward,
  take_rows_backward,
  gather_rows,
  gather_rows_backward,
  pretraining_loss,
  dropout,
  dropout_backward,
  sum_of_squares,
  adamw_update,
  lamb_update,
  sgd_update,
  cast,
  span_loss,
  classification_loss,
  regression_loss,
  // Cost-only: device models estimate them; no kernel runs them.
  all_reduce,     ///< the gradients over the replicas (collective.hpp runs it)
  host_transfer,  ///< a step's inputs from the host: input_shapes {{bytes}}, any dtype
  // Training, since op schema 9 (GroupBERT, docs/groupbert.md).
  grouped_dense,
  grouped_dense_backward,
  sequence_conv,
  sequence_conv_backward,
  glu,
  glu_backward,
  swish,
  swish_backward,
  // Training, since op schema 10 (DistilBERT's pre_classifier).
  relu,
  relu_backward,
  // Inference, since op schema 10 (MPNet): attention with a bias per head
  // looked up by a bucket per query and key (kernel.hpp).
  relative_attention,
  // Training and inference, since op schema 11 (ModernBERT): rotary
  // positions on the queries and keys of a fused QKV, and GeGLU.
  rotary,
  rotary_backward,
  geglu,
  geglu_backward,
  // Training, since op schema 11 (MPNet fine-tuning): relative_attention's
  // training forward and its backward (the bias table's gradient too).
  relative_attention_train,
  relative_attention_backward,
  // Training and inference, since op schema 11 (ModernBERT's classifier on
  // the mean of its tokens).
  mean_pool,
  mean_pool_backward,
};

/// Number of OpKind values.
inline constexpr std::size_t kOpKindCount =
    static_cast<std::size_t>(OpKind::mean_pool_backward) + 1;

/// Ops that only device models estimate: no kernel runs them.
constexpr bool is_cost_only(OpKind op) noexcept {
  return op == OpKind::all_reduce || op == OpKind::host_transfer;
}

/// An inference op (kernel.hpp): it computes in its desc's dtype with its
/// weights bound as constants. Every other op is a training op (f32 desc,
/// storage at round_to; train_kernels.hpp), which inference programs also
/// use where no inference op exists (GroupBERT's glu, ModernBERT's rotary).
constexpr bool is_inference_op(OpKind op) noexcept {
  return op < OpKind::dense || op == OpKind::relative_attention;
}

/// Every OpKind, in enum order.
std::span<const OpKind> all_op_kinds() noexcept;
/// The op's name as users and docs see it: "linear", "layernorm_backward".
std::string_view op_name(OpKind op) noexcept;
/// Inverse of op_name; nullopt for an unknown name.
std::optional<OpKind> parse_op_kind(std::string_view name) noexcept;

/// Activation fused into a linear op's epilogue.
enum class Activation : std::uint8_t { none, gelu, tanh, relu };
std::string_view activation_name(Activation a) noexcept;

/// Ops without attributes (element-wise ops, losses, gathers, sums).
struct NoAttrs {
  bool operator==(const NoAttrs&) const = default;
};

/// matmul: C = A B. out_dtype: the element type of C (defaults to the desc's dtype).
struct MatmulAttrs {
  std::optional<DType> out_dtype;
  bool operator==(const MatmulAttrs&) const = default;
};

/// How a linear op multiplies (the precision paths of Intel's BERT stack).
enum class LinearMath : std::uint8_t {
  native,  ///< in the desc's dtype, f32 accumulation
  /// bf32: tensors stay in the desc's dtype (f32); X and W are rounded to
  /// bf16 (nearest even) for the products, which accumulate in f32.
  bf16_products,
  /// X and W quantised to s8 as int8.hpp says (X with LinearAttrs::
  /// input_scale when > 0, else per row at run time), s8 x s8 products
  /// accumulated exactly in s32 and dequantised in the epilogue before the
  /// bias, activation and residual. Y is stored in the desc's dtype.
  int8,
  /// As bf16_products with f16 (IEEE binary16, nearest even): Intel's
  /// AMX-FP16 path, and what autocast to float16 does to a linear.
  f16_products,
};
std::string_view linear_math_name(LinearMath m) noexcept;

/// linear: Y = act(X W^T + b) [+ R].
struct LinearAttrs {
  std::int64_t out_features = 0;
  Activation activation = Activation::none;
  bool residual = false;  ///< a second input R is added in the epilogue
  LinearMath math = LinearMath::native;
  /// What produced X: gelu tells an int8 linear that X >= -0.17
  /// (int8.hpp kGeluShift), so dynamic quantisation may use u8 (one more bit).
  Activation input_activation = Activation::none;
  /// int8: X's one step (static, calibrated); 0: a step per row (dynamic).
  float input_scale = 0.0f;
  bool operator==(const LinearAttrs&) const = default;
};

/// layernorm (residual: normalises X + R), layernorm_train.
struct LayerNormAttrs {
  double eps = 1e-12;
  bool residual = false;  ///< inference layernorm only
  bool operator==(const LayerNormAttrs&) const = default;
};

/// attention, attention_train, attention_backward and the relative ones.
/// dropout > 0 (training ops only) drops the probabilities with
/// DropoutMask(rng, stream, dropout). window > 0: a query attends only the
/// keys at most `window` rows before or after it (ModernBERT's local layers:
/// local_attention / 2), besides what the mask allows; 0: every key.
struct AttentionAttrs {
  std::int64_t batch = 0, seq = 0, heads = 0;
  double dropout = 0.0;
  std::uint64_t stream = 0;
  std::int64_t window = 0;
  bool operator==(const AttentionAttrs&) const = default;
};

/// embedding, embedding_train, embedding_backward: position = row % seq.
struct EmbeddingAttrs {
  std::int64_t seq = 0;
  bool operator==(const EmbeddingAttrs&) const = default;
};

/// take_rows, take_rows_backward: rows 0, stride, 2*stride, ...
struct RowStrideAttrs {
  std::int64_t stride = 0;
  bool operator==(const RowStrideAttrs&) const = default;
};

/// dropout, dropout_backward: inverted dropout with probability p; the mask
/// is DropoutMask(rng, stream, p) (dropout_mask.hpp), regenerated in backward.
struct DropoutAttrs {
  double p = 0.0;
  std::uint64_t stream = 0;
  bool operator==(const DropoutAttrs&) const = default;
};

/// The optimizer's constant hyper-parameters (those that do not change from
/// step to step). lr, the step count and the gradient scale change every
/// step and reach the kernel as an OptimizerStep tensor.
struct OptimizerHyperParameters {
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-6;
  double weight_decay = 0.0;
  double momentum = 0.9;  ///< sgd only
  bool operator==(const OptimizerHyperParameters&) const = default;
};

/// adamw_update, lamb_update, sgd_update for one parameter tensor.
struct OptimizerUpdateAttrs {
  OptimizerHyperParameters hyper;
  bool decay = true;        ///< weight decay applies (not for biases and LayerNorm)
  bool trust_ratio = true;  ///< LAMB's per-tensor trust ratio applies
  /// Storage of the first moment m (momentum for sgd): f32, or f16 (the math
  /// stays f32; m is rounded to nearest even after each update), as PopART's
  /// accl1_type FLOAT16. The second moment v is always f32: squared
  /// gradients underflow f16's range.
  DType first_moment = DType::f32;
  bool operator==(const OptimizerUpdateAttrs&) const = default;
};

/// all_reduce (estimate only): over `replicas` ranks.
struct AllReduceAttrs {
  std::int64_t replicas = 1;
  bool operator==(const AllReduceAttrs&) const = default;
};

/// grouped_dense, grouped_dense_backward: a block-diagonal dense in `groups`
/// groups (GroupBERT's FFN down-projection).
struct GroupedDenseAttrs {
  std::int64_t groups = 1;
  bool operator==(const GroupedDenseAttrs&) const = default;
};

/// sequence_conv, sequence_conv_backward: a grouped convolution along the
/// sequence (GroupBERT's convolution module): channel groups of
/// `group_size`, `kernel` taps, zero padding (kernel-1)/2 before and the
/// rest after each sequence.
struct SequenceConvAttrs {
  std::int64_t batch = 0, seq = 0, group_size = 0, kernel = 0;
  bool operator==(const SequenceConvAttrs&) const = default;
};

/// rotary, rotary_backward: rotary position embeddings (Su et al.; GPT-NeoX's
/// halves, as transformers' rotate_half) on the q and k blocks of a fused
/// QKV[tokens, 3H] of `heads` heads, with frequencies theta^(-2c/d);
/// position = row % seq, or the position ids input (packed rows).
struct RotaryAttrs {
  std::int64_t seq = 0, heads = 0;
  double theta = 10000.0;
  bool operator==(const RotaryAttrs&) const = default;
};

/// Exactly one of these per op; op_attrs_index() says which. Alternatives
/// are appended only (their index is part of the op schema).
using OpAttrs = std::variant<NoAttrs, MatmulAttrs, LinearAttrs, LayerNormAttrs, AttentionAttrs,
                             EmbeddingAttrs, RowStrideAttrs, DropoutAttrs, OptimizerUpdateAttrs,
                             AllReduceAttrs, GroupedDenseAttrs, SequenceConvAttrs, RotaryAttrs>;

/// The OpAttrs alternative `op` takes (its variant index).
std::size_t op_attrs_index(OpKind op) noexcept;
/// The attribute struct's name for messages: "LinearAttrs".
std::string_view op_attrs_name(std::size_t variant_index) noexcept;

/// The per-step optimizer values. The update kernels read them from a
/// tensor of kOptimizerStepWords i64 elements holding this struct's bytes
/// (written with write_optimizer_step), so they change every step without
/// preparing the kernel again.
struct OptimizerStep {
  double learning_rate = 0.0;
  double grad_scale = 1.0;  ///< gradients are multiplied by it (1 / loss scale, 1 / replicas)
  std::int64_t step = 1;    ///< 1-based, for Adam's bias corrections
  std::int64_t reserved = 0;
};
inline constexpr std::int64_t kOptimizerStepWords = sizeof(OptimizerStep) / sizeof(std::int64_t);
static_assert(sizeof(OptimizerStep) == 32, "OptimizerStep is part of the op schema");

}  // namespace polyhal
