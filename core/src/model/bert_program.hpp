#pragma once
// BERT (BertForPreTraining) declared once as a Program: embeddings, encoder
// layer, pooler and heads are each written once (bert_program.cpp) and
// lowered either to inference ops (fused linear epilogues, weights bound as
// kernel constants, activations reused from layer to layer) or to training
// ops that keep what backward needs, with the backward of every op recorded
// as it is declared and emitted in reverse at the end.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/program.hpp"
#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/bert_inference.hpp"

namespace polyhal {

struct BertProgramOptions {
  BertConfig config;
  BertShape shape;
  bool training = false;  ///< forward + backward + loss; else the forward pass only
  bool heads = false;     ///< inference: the head's outputs (training always has them)
  /// What sits on the encoder (TaskHead, bert_config.hpp); classification
  /// runs on the pooled output after hidden dropout.
  TaskHead head;
  /// > 0 runs the MLM head on at most this many gathered positions per
  /// sequence (training, and evaluation of the pre-training heads); 0 on
  /// every position.
  std::int64_t max_predictions = 0;
  /// Training: the encoder layers whose activations are recomputed in
  /// backward instead of kept from forward (only each such layer's input
  /// stays; its intermediates share one set of buffers).
  std::set<std::int64_t> recompute;
  /// > 0 when rows are packed with at most this many sequences: position
  /// ids come per token and the attention mask holds sequence numbers.
  /// Pre-training: NSP runs on each sequence's [CLS]. Question answering
  /// (training and inference): a span per sequence slot, each softmax over
  /// its own sequence's tokens.
  std::int64_t packed_sequences = 0;
  /// Training: the whole model unless pipelined. A stage without embeddings
  /// reads its input activations from `stage_input` and writes their
  /// gradient to `stage_input_grad`; a stage without heads leaves its output
  /// in `stage_output` and takes that output's gradient in `stage_output_grad`.
  PipelineStage stage;
  double dropout = 0.0;            ///< training: hidden dropout
  double attention_dropout = 0.0;  ///< training: attention-probability dropout
  /// Inference: how the encoder's linears (int8_scales.hpp int8_linear_names)
  /// multiply. int8 with `int8_max_abs` quantises each one's input with the
  /// calibrated step (static); without, per row at run time (dynamic).
  LinearMath encoder_math = LinearMath::native;
  /// Training: the type the dense layers' operands are rounded to before
  /// their products (bf16: bf32 training); f32 multiplies exactly.
  DType products = DType::f32;
  std::map<std::string, float> int8_max_abs;
  /// Dynamic int8: the calibrated largest |x| per input channel of the
  /// linears to smooth (int8_scales.hpp int8_smoothed), by name. Each gets a
  /// smoothing constant (SmoothingPoint) that load_weights fills.
  std::map<std::string, std::vector<float>> int8_channel_max_abs;
};

/// Inference: the smoothing constant s[K] of an int8 linear (int8.hpp),
/// computed from its weight once the weights are loaded.
struct SmoothingPoint {
  int smoothing = -1;  ///< f32 [K], the linear's third constant
  int weight = -1;     ///< W[N, K]
  std::string name;    ///< int8_linear_names
};

/// Inference: an encoder linear's input, observed by calibration after the
/// forward op that follows its producer has run (the linear itself).
struct CalibrationPoint {
  std::size_t forward_op = 0;  ///< index of the linear in the forward list
  std::string name;            ///< int8_linear_names
  int input = -1;              ///< the tensor it reads
};

/// A trainable (or, in inference, loadable) tensor under its Hugging Face name.
struct BertParameter {
  std::string name;
  int weight = -1;
  int grad = -1;       ///< training: its f32 gradient (a view for Q, K and V)
  bool decay = false;  ///< weight decay and LAMB's trust ratio apply
  /// Not in the family's checkpoints (ModelFamily::zero_tensor): zeros,
  /// never updated by training, never written by exports.
  bool fixed = false;
};

/// The declared program and the tensors callers upload and read.
struct BertProgram {
  explicit BertProgram(Device& device, DType precision) : program(device, precision) {}
  Program program;
  std::vector<BertParameter> parameters;
  int ids = -1, types = -1, mask = -1;
  /// The model's token types: with one (RoBERTa's families) every token is
  /// type 0, as their tokenizers give it, whatever BERT's pair rule (SQuAD
  /// and GLUE features, generated inputs) said.
  std::int64_t type_vocab_size = 2;
  std::vector<std::int32_t> types_of(const std::vector<std::int32_t>& given) const {
    return type_vocab_size == 1 ? std::vector<std::int32_t>(given.size(), 0) : given;
  }
  int positions = -1;  ///< packed: i32 [B*S] position ids
  /// MPNet: i32 [B, S, S], the relative-position bucket of key j for query
  /// i (families/model_family.hpp relative_bucket; relative_bucket_input).
  int relative_buckets = -1;
  int nsp_positions = -1;  ///< packed: i32 [B*K] rows of each sequence's [CLS]
  int hidden = -1, pooled = -1, mlm_logits = -1, nsp_logits = -1;  // forward outputs
  // Training only.
  int mlm_labels = -1, mlm_positions = -1, nsp_labels = -1, loss_scale = -1, losses = -1;
  int rng = -1;  ///< i32 [seed, micro-batch index] keying the dropout masks
  // Fine-tuning heads.
  int head_logits = -1;     ///< [B*S, 2] start/end logits, or [B, num_labels]
  int head_loss = -1;       ///< training: f32 [1]
  int span_positions = -1;  ///< question answering: i32 [B, 2] start, end ([B*K, 2] packed)
  int labels = -1;          ///< classification: i32 [B]
  int targets = -1;         ///< regression: f32 [B]
  int cls_positions = -1;   ///< classification training: i32 [B] rows 0, S, 2S, ... of the tokens
  /// Inference: every encoder linear's input, in forward order.
  std::vector<CalibrationPoint> calibration_points;
  /// Inference, dynamic int8 with per-channel maxima: the smoothed linears.
  std::vector<SmoothingPoint> smoothing_points;
  // Pipeline stages (PipelineStage).
  int stage_input = -1, stage_input_grad = -1, stage_output = -1, stage_output_grad = -1;
};

/// The relative_buckets input of a batch of `shape` [B, S, S]: the family's
/// bucket of key j for query i of each row, from the tokens' positions in
/// their sequence (the row index, or a packed row's `positions`).
std::vector<std::int32_t> relative_bucket_input(const BertConfig& config, BertShape shape,
                                                const std::vector<std::int32_t>& positions);

/// Declares BERT on `device` at `precision` (checked op by op against the
/// device, nothing prepared or allocated). Throws ConfigError for options
/// the model cannot take.
std::unique_ptr<BertProgram> declare_bert(Device& device, DType precision,
                                          const BertProgramOptions& options);

}  // namespace polyhal
