#pragma once
// FLOPs and bytes moved by one run of a kernel, for the device models'
// rooflines. Derived from the op contracts in polyhal/kernel.hpp.
#include <cstdint>

#include "polyhal/kernel.hpp"

namespace polyhal::plugins {

struct OpCost {
  double flops = 0;     // on the matrix engine (0 for element-wise ops)
  double bytes = 0;     // read and written at least once
  bool matrix = false;  // matmul-like: runs on the AMP/MME units
  /// Memory traffic of a vector phase between the matrix work (attention's
  /// scores, softmax and probabilities: [B, heads, S, S] passes), which does
  /// not overlap it: added to the roofline time, not maxed with it.
  double vector_bytes = 0;
};

/// The dtype the op computes and stores in: a training op's desc says f32
/// with round_to the mixed precision (train_kernels.hpp operand_types), and
/// its GEMMs run at that precision's rate.
inline DType compute_dtype(const KernelDesc& desc) {
  const bool training =
      static_cast<std::uint16_t>(desc.op) >= static_cast<std::uint16_t>(OpKind::dense);
  return training && desc.round_to != DType::f32 ? desc.round_to : desc.dtype;
}

inline OpCost op_cost(const KernelDesc& desc) {
  const double element = static_cast<double>(dtype_size(compute_dtype(desc)));
  auto numel = [&](std::size_t i) {
    return static_cast<double>(element_count(desc.input_shapes.at(i)));
  };
  if (desc.op == OpKind::matmul) {
    const double m = static_cast<double>(desc.input_shapes[0][0]),
                 k = static_cast<double>(desc.input_shapes[0][1]);
    const double n = static_cast<double>(desc.input_shapes[1][1]);
    return {2 * m * n * k, (m * k + k * n + m * n) * element, true};
  }
  if (desc.op == OpKind::linear) {
    const double m = static_cast<double>(desc.input_shapes[0][0]),
                 k = static_cast<double>(desc.input_shapes[0][1]);
    const double n = static_cast<double>(desc.attrs_as<LinearAttrs>().out_features);
    return {2 * m * n * k, (m * k + k * n + m * n) * element, true};
  }
  // Attention's [B, heads, S, S] scores (tokens x heads x S elements): the
  // inference op writes them and reads them back through the softmax (2
  // passes); training's forward also stores the probabilities for backward
  // (3), and backward reads them and writes and reads their gradient (4).
  const auto score_bytes = [&](double tokens, double seq) {
    const auto& a = desc.attrs_as<AttentionAttrs>();
    return tokens * static_cast<double>(a.heads) * seq * element;
  };
  // Relative attention adds a bias per pair; a window masks pairs out but is
  // costed as the full attention it is computed as.
  if (desc.op == OpKind::attention || desc.op == OpKind::relative_attention) {
    const double tokens = static_cast<double>(desc.input_shapes[0][0]);
    const double hidden = static_cast<double>(desc.input_shapes[0][1]) / 3;
    const double seq = static_cast<double>(desc.attrs_as<AttentionAttrs>().seq);
    return {4 * tokens * seq * hidden, 4 * tokens * hidden * element, true,
            2 * score_bytes(tokens, seq)};
  }
  // Training ops (train_kernels.hpp): the GEMMs of dense and attention, and
  // their backward (dX and dW; dP, dV, dQ and dK: twice the forward).
  if (desc.op == OpKind::dense || desc.op == OpKind::dense_backward) {
    const bool forward = desc.op == OpKind::dense;
    const auto& x = desc.input_shapes.at(forward ? 0 : 1);
    const auto& w = desc.input_shapes.at(forward ? 1 : 2);
    const double m = static_cast<double>(x[0]), k = static_cast<double>(x[1]),
                 n = static_cast<double>(w[0]);
    const double gemms = forward ? 1.0 : 2.0;
    return {gemms * 2 * m * n * k, gemms * (m * k + k * n + m * n) * element, true};
  }
  if (desc.op == OpKind::attention_train || desc.op == OpKind::attention_backward ||
      desc.op == OpKind::relative_attention_train ||
      desc.op == OpKind::relative_attention_backward) {
    const bool forward =
        desc.op == OpKind::attention_train || desc.op == OpKind::relative_attention_train;
    const auto& qkv = desc.input_shapes.at(forward ? 0 : 1);
    const double tokens = static_cast<double>(qkv[0]);
    const double hidden = static_cast<double>(qkv[1]) / 3;
    const double seq = static_cast<double>(desc.attrs_as<AttentionAttrs>().seq);
    const double gemms = forward ? 1.0 : 2.0;
    return {gemms * 4 * tokens * seq * hidden, gemms * 4 * tokens * hidden * element, true,
            (forward ? 3.0 : 4.0) * score_bytes(tokens, seq)};
  }
  // GroupBERT: the grouped dense is G small GEMMs (1/G of the dense's work);
  // the sequence convolution multiplies each token's C-channel groups by K
  // taps, a GEMM of T x N x C*K work over its input, output and weights.
  // Both are costed at the matrix rate, which makes their estimates a lower
  // bound on time: 16-channel groups use the matrix units less well.
  if (desc.op == OpKind::grouped_dense || desc.op == OpKind::grouped_dense_backward) {
    const bool forward = desc.op == OpKind::grouped_dense;
    const auto& x = desc.input_shapes.at(forward ? 0 : 1);
    const auto& w = desc.input_shapes.at(forward ? 1 : 2);
    const double m = static_cast<double>(x[0]), k = static_cast<double>(x[1]),
                 n = static_cast<double>(w[0]), k_group = static_cast<double>(w[1]);
    const double gemms = forward ? 1.0 : 2.0;
    return {gemms * 2 * m * n * k_group, gemms * (m * k + n * k_group + m * n) * element, true};
  }
  if (desc.op == OpKind::sequence_conv || desc.op == OpKind::sequence_conv_backward) {
    const bool forward = desc.op == OpKind::sequence_conv;
    const auto& x = desc.input_shapes.at(forward ? 0 : 1);
    const double tokens = static_cast<double>(x[0]), channels = static_cast<double>(x[1]);
    const double weights = numel(forward ? 1 : 2);
    const double gemms = forward ? 1.0 : 2.0;
    return {gemms * 2 * tokens * weights, gemms * (2 * tokens * channels + weights) * element,
            true};
  }
  double bytes = 0;
  for (std::size_t i = 0; i < desc.input_shapes.size(); ++i) bytes += numel(i) * element;
  return {0, 2 * bytes, false};  // element-wise: read inputs, write as much
}

}  // namespace polyhal::plugins
