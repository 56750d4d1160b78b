#include "polyhal/op_schema.hpp"

#include <array>

namespace polyhal {
namespace {

struct OpEntry {
  OpKind op;
  std::string_view name;
  std::size_t attrs;  // OpAttrs index
};

template <class T>
constexpr std::size_t index_of() {
  return OpAttrs(T{}).index();
}

// One row per OpKind, in enum order (checked below).
constexpr std::array<OpEntry, kOpKindCount> kOps{{
    {OpKind::matmul, "matmul", index_of<MatmulAttrs>()},
    {OpKind::linear, "linear", index_of<LinearAttrs>()},
    {OpKind::layernorm, "layernorm", index_of<LayerNormAttrs>()},
    {OpKind::attention, "attention", index_of<AttentionAttrs>()},
    {OpKind::embedding, "embedding", index_of<EmbeddingAttrs>()},
    {OpKind::take_rows, "take_rows", index_of<RowStrideAttrs>()},
    {OpKind::dense, "dense", index_of<NoAttrs>()},
    {OpKind::dense_backward, "dense_backward", index_of<NoAttrs>()},
    {OpKind::gelu, "gelu", index_of<NoAttrs>()},
    {OpKind::gelu_backward, "gelu_backward", index_of<NoAttrs>()},
    {OpKind::tanh, "tanh", index_of<NoAttrs>()},
    {OpKind::tanh_backward, "tanh_backward", index_of<NoAttrs>()},
    {OpKind::add, "add", index_of<NoAttrs>()},
    {OpKind::layernorm_train, "layernorm_train", index_of<LayerNormAttrs>()},
    {OpKind::layernorm_backward, "layernorm_backward", index_of<NoAttrs>()},
    {OpKind::attention_train, "attention_train", index_of<AttentionAttrs>()},
    {OpKind::attention_backward, "attention_backward", index_of<AttentionAttrs>()},
    {OpKind::embedding_train, "embedding_train", index_of<EmbeddingAttrs>()},
    {OpKind::embedding_backward, "embedding_backward", index_of<EmbeddingAttrs>()},
    {OpKind::take_rows_backward, "take_rows_backward", index_of<RowStrideAttrs>()},
    {OpKind::gather_rows, "gather_rows", index_of<NoAttrs>()},
    {OpKind::gather_rows_backward, "gather_rows_backward", index_of<NoAttrs>()},
    {OpKind::pretraining_loss, "pretraining_loss", index_of<NoAttrs>()},
    {OpKind::dropout, "dropout", index_of<DropoutAttrs>()},
    {OpKind::dropout_backward, "dropout_backward", index_of<DropoutAttrs>()},
    {OpKind::sum_of_squares, "sum_of_squares", index_of<NoAttrs>()},
    {OpKind::adamw_update, "adamw_update", index_of<OptimizerUpdateAttrs>()},
    {OpKind::lamb_update, "lamb_update", index_of<OptimizerUpdateAttrs>()},
    {OpKind::sgd_update, "sgd_update", index_of<OptimizerUpdateAttrs>()},
    {OpKind::cast, "cast", index_of<NoAttrs>()},
    {OpKind::span_loss, "span_loss", index_of<NoAttrs>()},
    {OpKind::classification_loss, "classification_loss", index_of<NoAttrs>()},
    {OpKind::regression_loss, "regression_loss", index_of<NoAttrs>()},
    {OpKind::all_reduce, "all_reduce", index_of<AllReduceAttrs>()},
    {OpKind::host_transfer, "host_transfer", index_of<NoAttrs>()},
    {OpKind::grouped_dense, "grouped_dense", index_of<GroupedDenseAttrs>()},
    {OpKind::grouped_dense_backward, "grouped_dense_backward", index_of<GroupedDenseAttrs>()},
    {OpKind::sequence_conv, "sequence_conv", index_of<SequenceConvAttrs>()},
    {OpKind::sequence_conv_backward, "sequence_conv_backward", index_of<SequenceConvAttrs>()},
    {OpKind::glu, "glu", index_of<NoAttrs>()},
    {OpKind::glu_backward, "glu_backward", index_of<NoAttrs>()},
    {OpKind::swish, "swish", index_of<NoAttrs>()},
    {OpKind::swish_backward, "swish_backward", index_of<NoAttrs>()},
    {OpKind::relu, "relu", index_of<NoAttrs>()},
    {OpKind::relu_backward, "relu_backward", index_of<NoAttrs>()},
    {OpKind::relative_attention, "relative_attention", index_of<AttentionAttrs>()},
    {OpKind::rotary, "rotary", index_of<RotaryAttrs>()},
    {OpKind::rotary_backward, "rotary_backward", index_of<RotaryAttrs>()},
    {OpKind::geglu, "geglu", index_of<NoAttrs>()},
    {OpKind::geglu_backward, "geglu_backward", index_of<NoAttrs>()},
    {OpKind::relative_attention_train, "relative_attention_train", index_of<AttentionAttrs>()},
    {OpKind::relative_attention_backward, "relative_attention_backward",
     index_of<AttentionAttrs>()},
    {OpKind::mean_pool, "mean_pool", index_of<NoAttrs>()},
    {OpKind::mean_pool_backward, "mean_pool_backward", index_of<NoAttrs>()},
}};

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < kOps.size(); ++i) {
    if (static_cast<std::size_t>(kOps[i].op) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(), "kOps must list every OpKind in enum order");

constexpr std::array<OpKind, kOpKindCount> kAllOps = [] {
  std::array<OpKind, kOpKindCount> all{};
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = kOps[i].op;
  return all;
}();

constexpr std::array<std::string_view, std::variant_size_v<OpAttrs>> kAttrsNames{
    "NoAttrs",        "MatmulAttrs",       "LinearAttrs",
    "LayerNormAttrs", "AttentionAttrs",    "EmbeddingAttrs",
    "RowStrideAttrs", "DropoutAttrs",      "OptimizerUpdateAttrs",
    "AllReduceAttrs", "GroupedDenseAttrs", "SequenceConvAttrs",
    "RotaryAttrs"};

}  // namespace

std::span<const OpKind> all_op_kinds() noexcept {
  return kAllOps;
}

std::string_view op_name(OpKind op) noexcept {
  const auto i = static_cast<std::size_t>(op);
  return i < kOps.size() ? kOps[i].name : std::string_view("unknown-op");
}

std::optional<OpKind> parse_op_kind(std::string_view name) noexcept {
  for (const auto& entry : kOps) {
    if (entry.name == name) return entry.op;
  }
  return std::nullopt;
}

std::size_t op_attrs_index(OpKind op) noexcept {
  const auto i = static_cast<std::size_t>(op);
  return i < kOps.size() ? kOps[i].attrs : std::variant_npos;
}

std::string_view op_attrs_name(std::size_t variant_index) noexcept {
  return variant_index < kAttrsNames.size() ? kAttrsNames[variant_index]
                                            : std::string_view("unknown attributes");
}

std::string_view activation_name(Activation a) noexcept {
  switch (a) {
    case Activation::none:
      return "none";
    case Activation::gelu:
      return "gelu";
    case Activation::tanh:
      return "tanh";
    case Activation::relu:
      return "relu";
  }
  return "?";
}

std::string_view linear_math_name(LinearMath m) noexcept {
  switch (m) {
    case LinearMath::native:
      return "native";
    case LinearMath::bf16_products:
      return "bf16";
    case LinearMath::int8:
      return "int8";
    case LinearMath::f16_products:
      return "f16";
  }
  return "?";
}

}  // namespace polyhal
