#pragma once
/// @file tf_groupbert_layout.hpp
/// Graphcore's TensorFlow GroupBERT variables (graphcore/examples,
/// nlp/bert/tensorflow1/modeling.py, GroupBertModel) under polyhal's
/// GroupBERT names, after the generic TensorFlow-to-Hugging-Face mapping
/// (tf_bert_weights.hpp) has turned "/" into "." and transposed kernels.
/// The table is docs/groupbert.md, "Checkpoint names".
#include "polyhal/app/safetensors.hpp"

namespace polyhal {

/// True when `weights` (generic names) hold a GroupBERT layer as Graphcore
/// names it ("bert.encoder.layer.L.convolution...").
bool has_graphcore_groupbert_layers(const TensorMap& weights);

/// Renames Graphcore's GroupBERT tensors to polyhal's and lays them out as
/// polyhal does: the fused `attention/self/kernel/qkv_weight` split into
/// query, key and value; the dwconv weight [K, C, N] permuted to [N, C, K];
/// the final LayerNorm, which Graphcore creates at the root scope, becomes
/// `bert.encoder.final_norm`. Biases Graphcore's configs switch off
/// (use_qkv_bias, use_attention_projection_bias, use_prediction_bias false:
/// no variable) are zeros, which is what the TensorFlow model adds.
/// `fill_missing_biases` false leaves them out (optimizer moments).
TensorMap graphcore_groupbert_layout(TensorMap weights, bool fill_missing_biases = true);

}  // namespace polyhal
