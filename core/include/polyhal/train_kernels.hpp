#pragma once
/// @file train_kernels.hpp
/// Training ops (all tensors f32 unless noted; "+=" outputs accumulate, so
/// gradient accumulation needs no extra pass; weights are run inputs because
/// they change every step). Attribute structs are in op_schema.hpp; an op
/// without one below takes NoAttrs:
///   "dense":              X[M,K], W[N,K], b[N] -> Y[M,N] = X W^T + b
///   "dense_backward":     dY[M,N], X[M,K], W[N,K] -> dX[M,K], dW[N,K] +=, db[N] +=
///   "gelu", "tanh":       X -> Y;  "add": A, B -> A + B (same shape)
///   "gelu_backward":      dY, X -> dX;  "tanh_backward": dY, Y -> dX;
///   "relu": X -> Y;              "relu_backward": dY, Y -> dX (dY where Y > 0)
///   "layernorm_train":    X[M,H], gamma, beta -> Y, mean[M], rstd[M]; LayerNormAttrs
///   "layernorm_backward": dY, X, gamma, mean, rstd -> dX, dgamma +=, dbeta +=
///   "attention_train":    QKV[B*S,3H], mask[B,S] (i32, as attention's: sequence
///                         numbers, attention_allows) [, rng[2]] -> ctx[B*S,H],
///                         probs[B,heads,S,S] (before dropout)
///   "attention_backward": dctx, QKV, probs [, rng[2]], mask[B,S] (i32, as
///                         attention_train's: a kernel may skip the pairs it
///                         excludes) -> dQKV (overwritten)
///                         AttentionAttrs; with dropout = p > 0 (and
///                         stream) the probabilities are dropped with
///                         DropoutMask(rng, stream, p) before multiplying V:
///                         the mask is regenerated in backward, never stored
///   "embedding_train":    ids, types (i32), word, position, type [, position
///                         ids (i32; packed rows restart them per sequence;
///                         without: row % seq)] -> X[B*S,H]; EmbeddingAttrs
///   "embedding_backward": dX, ids, types [, position ids] -> dword +=,
///                         dposition +=, dtype +=; EmbeddingAttrs
///   "take_rows_backward": dY[R,H] -> dX rows 0, stride, ... +=; RowStrideAttrs
///   "gather_rows":        X[T,H], positions[R] (i32) -> Y[R,H] (row r = X[positions[r]])
///   "gather_rows_backward": dY[R,H], positions[R] -> dX[T,H] (overwritten: zero
///                         except the sum of the dY rows gathered from each row)
///   "pretraining_loss":   mlm_logits[T,V], mlm_labels[T] (i32, -100 ignored),
///                         nsp_logits[B,2], nsp_labels[B] (i32), loss_scale[1]
///                         -> losses[2] (mlm, nsp), dmlm[T,V], dnsp[B,2]
///                         (means over counted rows, gradients x loss_scale)
///   "dropout":            X, rng[2] (i32: seed, counter) -> Y; DropoutAttrs
///   "dropout_backward":   dY, rng[2] -> dX; the forward's DropoutAttrs: the mask
///                         (dropout_mask.hpp) is regenerated, never stored
///   "sum_of_squares":     X -> [1] sum of X^2 (for the global gradient norm)
///   "adamw_update", "lamb_update", "sgd_update":
///                         W, grad, m, v, step[kOptimizerStepWords] (i64: an
///                         OptimizerStep) -> W, m, v, grad (in place; grad is
///                         zeroed, ready for the next accumulation) [, W's
///                         compute copy at round_to, from the updated W];
///                         OptimizerUpdateAttrs (betas, epsilon, decay, ...)
///   "cast":               X (f32) -> Y (stored at round_to), round to nearest even
///   "span_loss":          logits[B*S,2] (start, end), positions[B,2] (i32), loss_scale[1]
///                         -> loss[1] = (CE over each sequence's start logits +
///                         CE over its end logits) / 2, means over sequences,
///                         positions clamped to [0, S] and S ignored (Hugging
///                         Face's BertForQuestionAnswering); dlogits.
///                         Packed rows: a fourth input mask[B,S] (the
///                         attention mask: token's sequence 1..K, 0 padding)
///                         and positions[B*K,2] indexing the row, slot j of
///                         row b being sequence j+1, -100 an empty slot; each
///                         softmax runs over its sequence's tokens only
///   "classification_loss": logits[B,C], labels[B] (i32, -100 ignored), loss_scale[1]
///                         -> loss[1] (mean CE), dlogits
///   "regression_loss":    predictions[B,1], targets[B] (f32), loss_scale[1]
///                         -> loss[1] (mean squared error, STS-B), dpredictions
/// GroupBERT (op schema 9, docs/groupbert.md):
///   "grouped_dense":      X[M,K], W[N,K/G], b[N] -> Y[M,N]; GroupedDenseAttrs: output j
///                         reads X's columns of group j / (N/G): Y = X_g W_j^T + b
///   "grouped_dense_backward": dY[M,N], X[M,K], W[N,K/G] -> dX[M,K], dW +=, db +=
///   "sequence_conv":      X[B*S,N], W[N,C,Kw], mask[B,S] (i32, as attention's) -> Y[B*S,N];
///                         SequenceConvAttrs: Y[t,o] = sum over taps k and the C
///                         channels i of o's group of W[o,i,k] X[t+k-(Kw-1)/2, i],
///                         over positions of t's own sequence only (padding, 0,
///                         gives 0 and reads as 0); no bias
///   "sequence_conv_backward": dY, X, W, mask -> dX (overwritten), dW +=
///   "glu":                A[M,2N] (values, then gates) -> Y[M,N] = values * sigmoid(gates)
///   "glu_backward":       dY[M,N], A[M,2N] -> dA[M,2N]
///   "swish":              X -> X * sigmoid(X);  "swish_backward": dY, X -> dX
/// MPNet and ModernBERT (op schema 11):
///   "relative_attention_train": QKV, mask, buckets[B,S,S] (i32, each below the
///                         table's rows), bias[NB,heads] [, rng[2]] -> ctx, probs:
///                         attention_train with bias[bucket, head] added to each
///                         scaled score (kernel.hpp relative_attention)
///   "relative_attention_backward": dctx, QKV, probs, buckets [, rng[2]], mask
///                         -> dQKV (overwritten), dbias[NB,heads] +=
///   "rotary":             QKV[T,3H] [, position ids[T] (i32)] -> QKV' [T,3H];
///                         RotaryAttrs: each head's q and k (d columns, halves
///                         x1 | x2) become x cos(p f) + (-x2 | x1) sin(p f),
///                         f_c = theta^(-2c/d) for c < d/2 (both halves),
///                         p the token's position (row % seq without ids); v
///                         is copied. An inference program runs it too.
///   "rotary_backward":    dQKV'[T,3H] [, position ids] -> dQKV (the inverse rotation)
///   "geglu":              A[M,2N] (inputs, then gates) -> Y[M,N] = gelu(inputs) * gates
///                         (exact erf GELU; ModernBERT's MLP)
///   "geglu_backward":     dY[M,N], A[M,2N] -> dA[M,2N]
///   "mean_pool":          X[B*S,H], mask[B,S] (i32, as attention's: 0 padding)
///                         -> Y[B,H], the mean of each row's tokens (0 for none)
///   "mean_pool_backward": dY[B,H], mask[B,S] -> dX[B*S,H] (overwritten)
/// Mixed precision: KernelDesc::round_to = bf16 | f16 stores the op's
/// activation operands at that dtype (operand_types() lists every operand):
/// activations and their gradients, and dense's weights (the program's
/// compute copy, refreshed by "cast" after each optimizer step). The math
/// inside is f32. Master weights, accumulated weight gradients ("+=", an
/// op's contribution rounded to round_to, the sum f32), optimizer state,
/// LayerNorm's mean and rstd, the losses, the loss scale and the sum of
/// squares stay f32. KernelDesc::dtype stays f32 for every training op.
#include <array>
#include <memory>
#include <vector>

#include "polyhal/kernel.hpp"
#include "polyhal/parallel.hpp"
#include "polyhal/reference_kernels.hpp"

namespace polyhal {

/// Registers the f32 reference implementation of every training op, run on
/// `parallel` (oneTBB when empty). Under round_to f16, `numerics` applies as
/// on the inference matmuls: f16 partials in every GEMM-like sum (dense,
/// dense_backward, attention forward and backward) and stochastic rounding
/// of every f16 output.
void register_reference_train_kernels(KernelRegistry& registry, ParallelFor parallel = {},
                                      MatMulNumerics numerics = {});

/// The precision an op holds its outputs at (KernelDesc::round_to).
inline DType round_type(const KernelDesc& desc) {
  return desc.round_to;
}

/// The storage dtype of every operand of an op: for a training op under the
/// desc's round_to, for an inference op its dtype (ids i32): what a program
/// allocates and what kernels may assume. Optional trailing inputs (the
/// attention's rng, a fused residual) are listed; a shorter list is fine.
struct OperandTypes {
  std::vector<DType> inputs, outputs;
  /// Outputs that accumulate ("+="): their previous contents are kept.
  std::vector<std::size_t> accumulated;
};
/// Throws std::invalid_argument for an op no kernel runs (all_reduce).
OperandTypes operand_types(const KernelDesc& desc);
/// Throws RuntimeFailure naming the op and operand when a tensor's dtype is
/// not the one operand_types(desc) lists (or there are too many tensors).
void check_operand_types(const KernelDesc& desc, const OperandTypes& types,
                         std::span<const Tensor> inputs, std::span<const Tensor> outputs);

/// Runs `f32_kernel` (an implementation on f32 tensors) on the storage
/// operand_types(desc) gives: low-precision inputs are widened into f32
/// scratch, low-precision outputs narrowed back (round to nearest even), and
/// accumulated f32 outputs get the op's contribution rounded to round_to
/// before it is added, which is the reference's mixed-precision rule. Also
/// checks each tensor's dtype against operand_types. Returns `f32_kernel`
/// itself when round_to is f32. A kernel runs one call at a time. With
/// `numerics.stochastic_rounding`, f16 outputs are rounded stochastically
/// (seeded by numerics.seed and the call), as the IPU does.
std::unique_ptr<Kernel> with_stored_precision(std::unique_ptr<Kernel> f32_kernel,
                                              const KernelDesc& desc, ParallelFor parallel,
                                              MatMulNumerics numerics = {});

/// The OptimizerStep in an update kernel's step tensor (i64 x
/// kOptimizerStepWords); throws RuntimeFailure for a tensor of another size.
OptimizerStep read_optimizer_step(const Tensor& step);
/// Writes `step` into host words for that tensor.
std::array<std::int64_t, kOptimizerStepWords> optimizer_step_words(const OptimizerStep& step);

}  // namespace polyhal
