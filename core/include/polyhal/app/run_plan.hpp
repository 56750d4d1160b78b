#pragma once
/// @file run_plan.hpp
/// The `plan` layer: the config as written, turned once into the decisions
/// of this run on these devices. The launcher loads a RunConfig (never
/// changed after), opens the devices, calls resolve_run, and hands both to
/// the task; what depends on the device (the precision mixed picks, IPUs per
/// replica, whether gradients overlap backward) is read from the plan, never
/// written back into the config. `validate` prints plan_lines(), the way
/// oneDNN's impl_info_str() names what it chose.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/config_schema.hpp"
#include "polyhal/app/int8_scales.hpp"
#include "polyhal/app/loss_scaler.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/device.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

/// What model.precision resolved to on the run's device.
struct PrecisionPlan {
  /// model.precision as written: mixed, f32, bf16, f16, int8 or bf32.
  std::string written;
  /// The activations' dtype, the one training computes in (int8: bf16 storage
  /// between the linears, bf32: f32).
  DType activations = DType::f32;
  /// How the encoder's GEMMs multiply (int8, bf32's bf16 products, native).
  LinearMath linear_math = LinearMath::native;
  /// Why: what mixed chose on this device, or whether an explicit precision
  /// runs natively or emulated there. Printed by validate and the summaries.
  std::string reason;
  /// Training: optimizer.loss_scaling resolved for `activations` (auto is
  /// dynamic for f16, none otherwise), starting at optimizer.loss_scale.
  LossScaler loss_scaler{LossScaler::Mode::none, 1.0, 2000};
  /// Logged once as the run starts (empty: nothing to say); `warning` when an
  /// explicit precision runs emulated.
  std::string log_line;
  bool warning = false;
  /// The tasks that run BertInference (TaskTrait::takes_int8): what it
  /// computes in. f16 on a device without f16 tensors (the CPU) is f32
  /// tensors with f16 products in the encoder's linears, as Intel's scripts
  /// autocast; int8 carries its calibrated scales (model.int8_scales, read
  /// once here): static its steps, dynamic its per-channel maxima.
  InferencePrecision inference;
  /// model.int8_scales as read, for the check that they were calibrated on
  /// the weights the run loads (check_int8_weights); empty when unused.
  std::optional<Int8Scales> int8_scales;
  /// Why the device cannot run `inference`, or cannot train in
  /// `activations` (tasks that train, by their trait): decided here, the
  /// device asked once before prepare; the task refuses with it when it
  /// does that work ("" when it can). Each names the better choice.
  std::string inference_refusal, training_refusal;
  /// The precision the run computes in: f32, bf16, f16, int8 or bf32.
  std::string name() const;
};

/// Where the run's replicas and pipeline stages go, and how they talk.
struct PlacementPlan {
  std::int64_t micro = 1;
  std::int64_t grad_accum = 1;
  /// Replicas of the whole job: batch.replicas, or the MPI ranks.
  int replicas = 1;
  /// Pipeline stages split evenly (model.pipeline_stages, or
  /// device.ipus_per_replica on a model that names no stages); 0: none, or
  /// model.pipeline's explicit list.
  std::int64_t balanced_stages = 0;
  /// Devices one replica takes: its pipeline stages, one each.
  std::int64_t stages_per_replica = 1;
  /// Gradients all-reduced in buckets during the last backward
  /// (collective.overlap true, or auto across hosts).
  bool overlap_all_reduce = false;
  /// A device model's estimate overlaps its links' transfers with backward
  /// (every collective.overlap but false: DMA, as the vendors' stacks do).
  bool estimate_overlaps = true;
  /// Why overlap_all_reduce is what it is, for the log (empty: as written).
  std::string overlap_reason;
  /// The backend's own collective engine is offered the collectives first.
  bool plugin_collectives = true;
  std::int64_t global_batch() const { return micro * grad_accum * replicas; }
};

/// The model a run computes and the weights it starts from. checkpoint.init
/// is a pre-training checkpoint (.safetensors), a TensorFlow checkpoint
/// prefix (DIR/model.ckpt-28252) or a model directory (Hugging Face's
/// config.json + model.safetensors, or Google's bert_config.json +
/// bert_model.ckpt.*). One rule for every task: the dimensions are
/// model.hf_config's, or model.preset's when the config sets it, else the
/// config.json (or bert_config.json) of the model directory, or beside the
/// TensorFlow prefix, else the preset; explicit model.* dimensions go on top.
struct ModelPlan {
  BertConfig dims;
  std::string name = "custom";  ///< the preset's name when the dimensions are a preset's alone
  /// Where the dimensions came from, for errors (the --set options and lines
  /// of explicit dimensions, then the file or the preset).
  std::string origin;
  /// checkpoint.init's weights (a directory's model file), else model.weights
  /// (else model.dir's model file); empty: a seeded initialisation.
  std::filesystem::path weights;
  /// The key that names `weights`: checkpoint.init, model.weights or model.dir.
  std::string weights_key;
  /// model.weights as the run uses it (else model.dir's model file): the
  /// weights a task loads that does not start from checkpoint.init.
  std::filesystem::path model_weights;
  /// checkpoint.init when it is a directory, else model.dir.
  std::filesystem::path model_dir;
  /// The config.json the dimensions came from (model.hf_config, model.dir's,
  /// checkpoint.init's), if any.
  std::filesystem::path config_file;
  /// The tokenizer's file: data.vocab, else the model directory's vocab.txt,
  /// else its tokenizer.json; and where that came from.
  std::filesystem::path vocab;
  std::string vocab_source;
  /// The tokenizer: `vocab` with data.lower_case (else the directory's
  /// do_lower_case, else uncased), data.special_tokens (else kept as text by
  /// the tasks that run inference, split by the others) and the directory's
  /// longest-word rule; refused at open when it holds more tokens than the
  /// model's vocab_size.
  TokenizerSpec tokenizer;
  /// Tokens per sequence: model.seq_len, else model.dir's
  /// sentence_bert_config.json max_seq_length; and where that came from.
  std::int64_t seq_len = 128;
  std::string seq_len_source;
  /// The tasks that run inference: model.head (none, pretraining,
  /// question_answering, classification), else a fine-tuned model.dir's
  /// (config.json's architectures) with its label count; and where it came from.
  std::string head = "none";
  bool heads = false;  ///< model.heads: also the MLM and NSP heads
  std::int64_t num_labels = 2;
  std::string head_source;
  /// The model's own config.json head (architectures, id2label's labels,
  /// problem_type) when it names one.
  std::optional<TaskHead> file_head;
  /// The start model's label names in its class order (its config.json's
  /// id2label, a sequence classifier's), empty when it has none: a
  /// fine-tuning keeps the model's order and names (issue 72, item 6).
  std::vector<std::string> start_labels;
};

/// A place the run writes, as the config names it.
struct OutputPlace {
  std::string key;  ///< "checkpoint.dir", "inference.output", "log.metrics", ...
  std::filesystem::path path;
  OutputPath kind = OutputPath::file;
};

/// Where a run resumes from and what it writes.
struct OutputPlan {
  std::filesystem::path checkpoint_dir;  ///< checkpoint.dir; empty: no checkpoints
  /// checkpoint.resume, and a checkpoint.dir to resume from.
  bool resume = false;
  /// The newest checkpoint in checkpoint_dir when the run was planned (a
  /// training run resumes from it; the run looks again as it starts, under
  /// the directory's lock).
  std::filesystem::path resume_from;
  /// A training task's final weights as a Hugging Face directory (the task's
  /// TaskSchema::export_dir); empty: none.
  std::filesystem::path export_dir;
  /// Every place the config names that the run writes (each key its schema
  /// declares an OutputPath), in schema order; export_dir not among them.
  std::vector<OutputPlace> places;
};

/// The decisions of one run.
struct RunPlan {
  ModelPlan model;
  PrecisionPlan precision;
  PlacementPlan placement;
  OutputPlan outputs;
};

/// The processes of the job: one, or the ranks of an mpirun job.
struct WorldShape {
  int ranks = 1;
  int ranks_on_this_host = 1;
  bool mpi = false;
};

/// The CPUs this process may run on.
std::int64_t available_cpus();

/// Resolves `config` for `devices` (the backend's, opened with `device_options`,
/// the run's device first) in `world`; `plan_only` (validate, --compile-only):
/// checkpoint.init need not exist yet when model.preset or model.hf_config
/// gives the dimensions. Throws ConfigError naming file:line:key
/// for what cannot be placed: more replicas (x stages) than a modelled system
/// has devices, more local replicas than CPUs, device.ipus_per_replica that
/// disagrees with model.pipeline, collective.plugin_engine required without an
/// engine, batch.replicas other than the MPI ranks.
RunPlan resolve_run(const RunConfig& config, const std::vector<Device*>& devices,
                    const DeviceOptions& device_options, const WorldShape& world,
                    bool plan_only = false);

/// The model and start weights of a task that reads `model` (ModelPlan's
/// rule); model.seq_len checked against it. Part of resolve_run.
ModelPlan resolve_model(const RunConfig& config, bool plan_only);

/// The dimensions `model` gives: hf_config if set, else the preset, then any
/// explicit dimensions on top. A combination that is no model is a
/// ConfigError starting with `where`.
BertConfig resolve_bert_config(const ModelSection& model, const std::string& where = "model");

/// model.precision on `device`: what it runs as, and why. Part of resolve_run.
PrecisionPlan resolve_precision(const RunConfig& config, const Device& device,
                                const ModelPlan& model);
/// What BertInference computes in for this run: `plan.inference`, or the
/// ConfigError naming model.precision when the device cannot run it.
const InferencePrecision& inference_precision(const RunConfig& config, const PrecisionPlan& plan);
/// Training: the ConfigError naming model.precision when the device cannot
/// train in the plan's precision, or the precision is for inference only.
void refuse_untrainable_precision(const RunConfig& config, const PrecisionPlan& plan);

[[noreturn]] void throw_precision_refused(const RunConfig& config, const KernelNotFoundError& e);

/// Runs `make` (which prepares a BertInference); a kernel the device refuses
/// for int8 or bf32 becomes a ConfigError naming model.precision and the
/// config file, with the device's reason.
template <class Make>
auto refusing_precision(const RunConfig& config, Make make) {
  try {
    return make();
  } catch (const KernelNotFoundError& e) {
    if (config.model.linear_math == LinearMath::native) throw;
    throw_precision_refused(config, e);
  }
}

/// optimizer.loss_scaling for training in `activations`. Part of resolve_precision.
LossScaler resolve_loss_scaling(const OptimizerSection& optimizer, DType activations);

/// Where `config` resumes from and what it writes. Part of resolve_run.
OutputPlan resolve_outputs(const RunConfig& config);

/// The plan as validate prints it, one indented line per decision.
std::string plan_lines(const RunPlan& plan, const Device& device);

}  // namespace polyhal
