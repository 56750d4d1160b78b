#pragma once
// A device model's estimated timeline of optimizer steps, for --profile on
// a model: the whole model's micro-batches one after another, or a
// pipeline's 1F1B schedule simulated stage by stage with its bubbles, then
// the gradient all-reduce and the optimizer. Every slice's length is the
// device model's estimate; nothing here is measured.
#include <cstdint>
#include <optional>

#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/pipelined_training.hpp"
#include "polyhal/app/step_trace.hpp"
#include "train/training_model.hpp"

namespace polyhal {

/// Micro-batches of a step whose kernels the timeline shows one by one
/// (the rest as whole passes: a long accumulation stays a small trace).
inline constexpr int kTracedKernelMicroBatches = 2;

/// Step `step` of `work` for the whole model on `lane`'s track "replica R",
/// from `start_us`; returns its end, or nullopt on real hardware.
std::optional<double> trace_estimated_whole_step(TraceLane& lane, const BertTraining& model,
                                                 Device& device, const StepWork& work,
                                                 std::int64_t step, double start_us);

/// The same for a pipeline: each stage on its track "replica R stage S".
std::optional<double> trace_estimated_pipeline_step(TraceLane& lane, const PipelinedTraining& model,
                                                    Device& device, const StepWork& work,
                                                    std::int64_t step, double start_us);

}  // namespace polyhal
