#pragma once
/// @file bert_training.hpp
/// BertForPreTraining training step on any Device, through Kernels only:
/// forward keeping what backward needs, MLM + NSP loss, explicit backward of
/// every layer in reverse, optimizer step. Gradients accumulate over
/// micro-batches until optimizer_step(). f32, or bf16/f16 mixed precision.
///
///   forward:   x0 = LN(embed); per layer: qkv, (ctx, probs) = attention,
///              s1 = ctx Wo + bo + x, x1 = LN(s1), f = gelu(x1 Wi + bi),
///              s2 = f Wf + bf + x1, x' = LN(s2); pooled = tanh(cls Wp + bp);
///              nsp = pooled Wn + bn; mlm = LN(gelu(x Wt + bt)) word^T + b
///   loss:      mean CE over labelled MLM positions + mean CE of NSP
///   backward:  the same list reversed (bert_training.cpp, one line per op)
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/op_time.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/step_trace.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// One micro-batch: inputs plus the labels its head needs.
struct TrainingBatch {
  BertInputs inputs;
  std::vector<std::int32_t> mlm_labels;  ///< pre-training: token id to predict, -100 elsewhere
  /// Pre-training: 0 = is next, 1 = random; per row, or per sequence slot
  /// ([B*K], -100 for an empty slot) when rows are packed.
  std::vector<std::int32_t> nsp_labels;
  /// Packed rows: [B*K] token index (row * S + start) of each sequence's
  /// [CLS]; an empty slot points at its row's first token.
  std::vector<std::int32_t> nsp_positions{};
  /// Question answering: the answer's first and last token per sequence
  /// (clamped to [0, seq]; seq means none, as Hugging Face). Packed rows:
  /// [B*K], the token's index in its row, -100 for an empty slot.
  std::vector<std::int32_t> start_positions{}, end_positions{};
  std::vector<std::int32_t> labels{};  ///< classification: class per sequence (-100 ignored)
  std::vector<float> targets{};        ///< regression (num_labels 1): target per sequence
  std::uint64_t index = 0;             ///< position in the data stream: keys the dropout masks
};

struct OptimizerSettings {
  std::string kind = "lamb";  ///< lamb | adamw | sgd
  double learning_rate = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-6;
  double weight_decay = 0.01;  ///< not applied to biases and LayerNorm (as the seeds)
  double momentum = 0.9;       ///< sgd only
  double max_grad_norm = 0.0;  ///< clip the global gradient norm to this (0: off)
  /// Storage of the first moment (f32 or f16; OptimizerUpdateAttrs::first_moment).
  DType first_moment = DType::f32;
};

struct StepLosses {
  double mlm = 0, nsp = 0;  ///< pre-training
  double task = 0;          ///< a fine-tuning head's loss
  double total() const { return mlm + nsp + task; }
};

/// Dropout probabilities, each in [0, 1); 0 turns that dropout off.
struct DropoutSettings {
  double hidden = 0.0;     ///< embeddings, attention and FFN outputs (HF hidden_dropout_prob)
  double attention = 0.0;  ///< attention probabilities (HF attention_probs_dropout_prob)
};

/// A device model's estimate of one replica's training work (seconds).
struct TrainingWorkEstimate {
  double forward = 0;   ///< one micro-batch's forward pass and loss
  double backward = 0;  ///< one micro-batch's backward pass
  double optimizer =
      0;  ///< one optimizer step: norms, updates, compute copies (this replica's share)
  double host_io = 0;  ///< one micro-batch's inputs (ids, masks, labels) from the host
};

/// Everything a training program takes besides its device, model and
/// micro-batch shape.
struct BertTrainingOptions {
  OptimizerSettings optimizer{};
  /// f32, or bf16 / f16 for mixed precision: f32 master weights, weight
  /// gradients and optimizer state; activations and their gradients stored
  /// at `precision`, and the GEMMs read a compute copy of the weights at
  /// `precision`, cast from the masters after every optimizer step
  /// (train_kernels.hpp operand_types). LayerNorm statistics and losses f32.
  DType precision = DType::f32;
  /// With precision f32: the type the dense layers round their operands to
  /// before the products, f32 accumulation (bf16: bf32, the Intel seed's
  /// training precision); f32 multiplies exactly.
  DType products = DType::f32;
  /// Masks keyed by (seed, batch index, position in the step), so any
  /// replica, thread split or resume draws the same ones.
  DropoutSettings dropout{};
  std::uint64_t seed = 0;
  /// > 0: the MLM head (transform, decoder, loss) runs only on the labelled
  /// positions, at most that many per sequence (the seeds'
  /// max_predictions_per_seq), which saves most of the vocabulary GEMM; a
  /// micro-batch with more labels than that is refused. 0: the head runs on
  /// every position.
  std::int64_t max_predictions = 0;
  TaskHead head{};
  /// Encoder layers whose activations are not kept for backward but
  /// recomputed there from the layer's input (the seeds' recomputation):
  /// the same numerics, one layer's intermediates in memory instead of one
  /// set per layer, one more forward of those layers per step.
  std::set<std::int64_t> recompute{};
  /// > 0: rows packed with at most that many sequences (pre-training or
  /// question answering): TrainingBatch gives position ids, sequence numbers
  /// as the attention mask, and per sequence slot the NSP [CLS] rows and
  /// labels or the answer spans (row positions, -100 empty).
  std::int64_t packed_sequences = 0;
};

class BertTraining {
 public:
  /// `stage`: pipelining, the part of the model this program trains.
  BertTraining(Device& device, const BertConfig& config, BertShape micro_batch,
               BertTrainingOptions options, PipelineStage stage = {});
  ~BertTraining();
  BertTraining(const BertTraining&) = delete;
  BertTraining& operator=(const BertTraining&) = delete;

  /// Weights, gradients, optimizer state and activations, without allocating.
  MemoryReport plan_memory() const;
  /// The same with `extra` items on the same device (a pipeline's stashes).
  MemoryReport plan_memory(const std::vector<MemoryItem>& extra) const;
  /// Uploads weights (Hugging Face names) as f32 master weights; zeroes
  /// gradients and optimizer state.
  void load_weights(const TensorMap& weights);
  /// Forward and backward of one micro-batch; gradients accumulate, each
  /// scaled by 1/accumulation_steps. Returns the micro-batch's losses.
  /// Gradients come out multiplied by `loss_scale` (fp16 loss scaling).
  StepLosses forward_backward(const TrainingBatch& batch, int accumulation_steps = 1,
                              double loss_scale = 1.0);
  /// Pipelining, one stage's half of forward_backward: uploads what this
  /// stage reads of `batch` and `input` (the previous stage's output, empty
  /// for the first stage) and runs forward. Returns this stage's output
  /// activations for the next stage (empty for the last).
  std::vector<float> stage_forward(const TrainingBatch& batch, const std::vector<float>& input,
                                   int accumulation_steps = 1, double loss_scale = 1.0);
  /// Runs backward from `output_grad` (the next stage's input gradient,
  /// empty for the last stage) and returns the gradient of this stage's
  /// input (empty for the first). The last stage's losses: last_losses().
  std::vector<float> stage_backward(const std::vector<float>& output_grad);
  /// Replaces the accumulated gradient of parameter `name` (f32 values):
  /// pipelining sums the gradients of a weight two stages share (the word
  /// embeddings, tied to the MLM decoder) into both.
  void set_gradient(const std::string& name, const std::vector<float>& values);
  /// Pipelining: a micro-batch's forward values, saved to the host so the
  /// stage can run other micro-batches before this one's backward.
  using Stash = std::vector<std::vector<std::byte>>;
  Stash stash() const;
  void unstash(const Stash& saved);
  /// Bytes of one stash (the activations and inputs an in-flight
  /// micro-batch holds on the device in a real pipeline).
  std::uint64_t stash_bytes() const;
  /// The losses of the last forward (last stage only).
  StepLosses last_losses() const;
  /// Applies the optimizer to the accumulated gradients (divided by
  /// `loss_scale`, clipped to max_grad_norm when set), then zeroes them.
  /// Returns the global gradient norm before clipping, or nullopt when a
  /// gradient overflowed (inf/NaN): then no weight changes and the step is
  /// not counted.
  std::optional<double> optimizer_step(double learning_rate, double loss_scale = 1.0);
  /// Pipelining: the sum of squares of this stage's accumulated gradients
  /// (still multiplied by the loss scale), and the optimizer step with the
  /// sum over every stage, so all stages clip by the global norm and skip an
  /// overflowed step together. Returns what optimizer_step returns.
  double gradient_sum_of_squares() const;
  std::optional<double> apply_update(double learning_rate, double loss_scale, double sum);
  /// Replicated optimizer-state sharding (ZeRO stage 1; the seeds'
  /// replicated tensor sharding): each replica of `replicas` keeps the
  /// optimizer state of, and updates, only its share of the parameter
  /// tensors (largest first to the least-loaded replica), then broadcasts
  /// them. Saves (N-1)/N of the optimizer state per replica; the results are
  /// those of unsharded training. Call on every replica before load_weights;
  /// `replicas` must outlive this object. optimizer_step() and state() then
  /// become collectives: every replica calls them together.
  void shard_optimizer_state(Communicator& replicas);
  /// Data parallelism: replaces the accumulated gradients by their mean over
  /// the replicas of `replicas` (one all-reduce per gradient tensor, in a
  /// fixed order). Every replica calls it after its micro-batches and before
  /// optimizer_step, so all replicas apply the same update.
  void all_reduce_gradients(Communicator& replicas);
  /// The same reduction, done during the next backward pass instead (then
  /// all_reduce_gradients has nothing left to do): buckets of about
  /// `bucket_bytes` of gradients, in the order backward finishes them, each
  /// reduced by a communication thread once backward has written it, as
  /// PyTorch DDP does. Each tensor keeps its own all-reduce, so the result
  /// is bit-identical. No other collective may run during that backward.
  void reduce_gradients_during_next_backward(Communicator& replicas, std::size_t bucket_bytes);
  /// Current weights and accumulated gradients, under Hugging Face names.
  TensorMap weights() const;
  TensorMap gradients() const;
  std::int64_t steps_taken() const;
  /// Trainable parameters (= gradient elements all-reduced per optimizer step).
  std::int64_t parameter_count() const;
  /// Everything a checkpoint needs: weights under Hugging Face names plus
  /// "optimizer.m.<name>" and "optimizer.v.<name>".
  TensorMap state() const;
  /// Restores state() output and the optimizer's step count, exactly.
  void load_state(const TensorMap& state, std::int64_t steps);
  /// The device's estimate of the work (kernel by kernel, as the device
  /// model prices each op), or nullopt on real hardware, which gives none.
  std::optional<TrainingWorkEstimate> estimate_work() const;
  /// The kernels of one micro-batch's forward (or backward) pass with the
  /// device model's estimate of each, for an estimated trace; nullopt on
  /// real hardware.
  std::optional<std::vector<EstimatedSlice>> estimated_kernels(bool backward) const;
  /// Kernel runs and uploads go on `track` while it records (--profile);
  /// nullptr stops. The track must outlive the runs.
  void set_trace(TraceTrack* track) noexcept;
  /// Time per op kind since construction, largest first. Each kernel run is
  /// timed with a steady clock (tens of nanoseconds against milliseconds of
  /// work), so this is always on.
  std::vector<OpTime> profile() const;

  struct State;

 private:
  std::optional<double> apply_optimizer(double learning_rate, double loss_scale);
  std::unique_ptr<State> state_;
};

}  // namespace polyhal
