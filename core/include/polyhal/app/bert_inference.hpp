#pragma once
/// @file bert_inference.hpp
/// BERT in eval mode, on any Device, through Kernels only: the encoder and
/// the pre-training, question-answering or classification head.
///
/// Prepared once for a fixed (batch, seq) and precision: every kernel is
/// prepared in the constructor (a device lacking one fails here, not at step
/// 1000), the memory plan is known before anything is allocated, and run()
/// allocates nothing. The forward pass, top to bottom:
///
///   x = LayerNorm(word[ids] + position[s] + type[t])                [T, H]
///   per layer: qkv = x Wqkv^T + b                                   [T, 3H]
///              ctx = softmax(q k^T / sqrt(d) + mask) v  per head    [T, H]
///              x1  = LayerNorm(ctx Wo^T + bo + x)   (residual in the linear epilogue)
///              f   = gelu(x1 Wi^T + bi)                             [T, I]
///              x   = LayerNorm(f Wf^T + bf + x1)                    [T, H]
///   pooled = tanh(x[CLS] Wp^T + bp)                                 [B, H]
///   nsp    = pooled Wn^T + bn                                       [B, 2]
///   mlm    = LayerNorm(gelu(x Wt^T + bt)) word^T + b_vocab          [T, V]
/// with T = batch x seq tokens; the MLM decoder reuses the word embeddings.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/step_trace.hpp"

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/op_time.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// Host inputs, batch x seq each, row-major.
struct BertInputs {
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> token_type_ids;
  /// 0 = padding, else the token's sequence in its row: 1 everywhere in an
  /// unpacked row, 1..K in a packed one (kernel.hpp attention_allows).
  std::vector<std::int32_t> attention_mask;
  /// Packed rows: each token's position in its sequence; empty: 0..S-1.
  std::vector<std::int32_t> position_ids{};
  /// A model prepared with mlm_predictions P: batch x P token indices
  /// (row x seq + position) whose MLM logits are computed, in that order.
  std::vector<std::int32_t> mlm_positions{};
};

/// Host outputs in f32 (empty when not asked for).
struct BertOutputs {
  std::vector<float> last_hidden_state;  ///< [batch, seq, hidden]
  std::vector<float> pooled;             ///< [batch, hidden]
  /// [batch, seq, vocab] (with heads); [batch x P, vocab] with mlm_predictions P
  std::vector<float> mlm_logits;
  std::vector<float> nsp_logits;                ///< [batch, 2] (with heads)
  std::vector<float> start_logits, end_logits;  ///< question answering: [batch, seq] each
  std::vector<float> logits;  ///< classification: [batch, num_labels]; regression: [batch]
};

/// How an inference computes: its activations' dtype, and how the encoder's
/// linears multiply (int8 with calibrated scales, or bf32's bf16 products).
struct InferencePrecision {
  InferencePrecision(DType type = DType::f32) : dtype(type) {}  // NOLINT: a plain dtype is one
  DType dtype;
  LinearMath encoder_math = LinearMath::native;
  /// int8 static: the calibrated largest |x| at each encoder linear's input
  /// (int8_scales.hpp); empty: int8 quantises X per row at run time (dynamic).
  std::map<std::string, float> int8_max_abs;
  /// int8 dynamic: the calibrated largest |x| per input channel of the
  /// linears to smooth (int8_scales.hpp int8_smoothed); empty: no smoothing.
  std::map<std::string, std::vector<float>> int8_channel_max_abs;
};

class BertInference {
 public:
  /// Prepares every kernel on `device`. `with_heads` adds the MLM and NSP
  /// heads. `packed`: rows hold several sequences (run() then requires
  /// BertInputs::position_ids; the mask numbers each token's sequence).
  BertInference(Device& device, const BertConfig& config, BertShape shape,
                const InferencePrecision& precision, bool with_heads, bool packed = false);
  /// The model class of `head` (bert_config.hpp): BertForPreTraining with its
  /// MLM and NSP heads, BertForQuestionAnswering (start/end logits, no
  /// pooler) or BertForSequenceClassification (pooled output and logits).
  /// `packed`: question answering on packed rows (several sequences per
  /// row): run() then requires BertInputs::position_ids, and the attention
  /// mask numbers each token's sequence.
  /// `mlm_predictions` > 0 (pre-training head): the MLM head runs on that
  /// many gathered positions per sequence (BertInputs::mlm_positions), as
  /// training's does: evaluation scores the masked tokens without the
  /// vocabulary GEMM of every position.
  BertInference(Device& device, const BertConfig& config, BertShape shape,
                const InferencePrecision& precision, const TaskHead& head, bool packed = false,
                std::int64_t mlm_predictions = 0);
  ~BertInference();
  BertInference(const BertInference&) = delete;
  BertInference& operator=(const BertInference&) = delete;

  /// Weights, activations and kernel workspace on the device, without allocating.
  MemoryReport plan_memory() const;
  /// Uploads weights (Hugging Face names, see bert_weights.hpp) in the model's
  /// precision and allocates activations. Call once before run().
  void load_weights(const TensorMap& weights);
  /// Instead of load_weights: the weights `loaded` holds (loaded already, of
  /// the same model and precision on the same device, prepared for another
  /// shape of at least as many tokens), shared rather than copied, and the
  /// first rows of its activations: the two must never run at the same
  /// time. The server runs one model in several shapes this way, one call
  /// at a time per replica. `loaded` must outlive this model's runs.
  void share_weights(const BertInference& loaded);
  /// One forward pass. Copies results to `outputs` if it is not null.
  void run(const BertInputs& inputs, BertOutputs* outputs);
  /// Calibration: from now on every run() also records the largest |x| at
  /// each encoder linear's input (int8_scales.hpp int8_linear_names), over
  /// the whole input and per input channel.
  void start_calibration();
  /// Whether start_calibration() was called.
  bool calibrating() const noexcept;
  /// What the runs since start_calibration() recorded, and how many runs.
  const std::map<std::string, float>& calibrated_max_abs() const;
  /// The same per input channel (column of each linear's input).
  const std::map<std::string, std::vector<float>>& calibrated_channel_max_abs() const;
  std::int64_t calibrated_batches() const;

  /// Host time per kind of op over every run so far, most first, with the
  /// kernel that ran it.
  std::vector<OpTime> profile() const;
  /// Forward passes run so far (warmup included).
  std::int64_t runs() const;
  /// Floating-point operations of one forward pass (matmuls and attention).
  double flops() const;
  /// The device model's estimate of one forward pass (sum over kernels), or
  /// nullopt when the device gives none for some kernel (real hardware).
  std::optional<double> estimate_seconds() const;
  /// The forward pass's kernels with the device model's estimate of each
  /// (an estimated trace); nullopt on real hardware.
  std::optional<std::vector<EstimatedSlice>> estimated_kernels() const;
  /// --profile: run N (from 1) is batch N of `lane`, on its track
  /// "inference" with its upload, kernels and download, while N is in the
  /// window; nullptr stops. The lane must outlive the runs.
  void set_trace(TraceLane* lane);
  const BertConfig& config() const;
  const TaskHead& head() const;
  BertShape shape() const;

  struct State;

 private:
  void read_head_outputs(BertOutputs& out) const;
  std::unique_ptr<State> state_;
};

}  // namespace polyhal
