#pragma once
/// @file inference_task.hpp
/// The `inference` task: BERT forward passes on generated data (the default,
/// as the seeds' --generated-data) or on text through the WordPiece
/// tokenizer, timed per batch.
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/step_trace.hpp"

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/op_time.hpp"
#include "polyhal/app/served_model.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

struct InferenceResult {
  std::string model_name;  ///< preset name, or "custom"
  BertConfig config;
  std::int64_t batch = 0, seq = 0;
  MemoryReport memory;
  double flops_per_batch = 0;
  /// Wall time of each timed batch on this host (simulation time on a model).
  std::vector<double> batch_seconds;
  /// Wall time of the measured batches, from the first start to the last end.
  double measured_seconds = 0;
  /// Device-model estimate per batch; nullopt on real hardware.
  std::optional<double> estimated_batch_seconds;
  std::size_t text_examples = 0;  ///< examples written to inference.output
  /// Text inference: the lines' own tokens, and the tokens the model
  /// computed (rows x seq_len x batches, padding included).
  std::int64_t real_tokens = 0, computed_tokens = 0;
  /// Host time per kind of op over every batch run (warmup included), most
  /// first, with the kernel that ran it (which ISA, int8 or bf16).
  std::vector<OpTime> profile;
  std::int64_t forward_runs = 0;  ///< the batches `profile` covers
};

/// Prepares the model (kernels, memory plan); with `compile_only` stops
/// there. Otherwise loads or initialises weights and runs warmup plus timed
/// batches; in text mode writes one JSON line per example to
/// inference.output. With `trace` (--profile), batch N is the Nth forward
/// pass, warm-up included: measured on this host, else the device model's
/// estimated passes (also with `compile_only`).
InferenceResult run_inference(const TaskContext& context, bool compile_only,
                              StepTrace* trace = nullptr);

/// p-th percentile (0-100) of `values`, nearest rank.
double percentile(std::vector<double> values, double p);

/// The inference section's settings a served model reads (`polyhal serve`).
ServedTextOptions served_text_options(const RunConfig& config);

}  // namespace polyhal
