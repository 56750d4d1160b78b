#pragma once
// Pre-training with model.pipeline: the stages' plans and estimate, and the
// run through the 1F1B schedule (pipelined_training.hpp).
#include <set>

#include "polyhal/pretrain_task.hpp"
#include "polyhal/pretraining_data.hpp"

namespace polyhal {

/// Fills `result` (stages already set): per-stage memory, the estimate with
/// the pipeline's ramp, and with `compile_only` false the steps. Stage s
/// runs on stage_devices[s] when there is one device per stage (a modelled
/// IPU each), else on `device` (the CPU). Loss scaling, clipping by the
/// global norm over all stages, checkpoints and resume as unpipelined; not
/// yet several replicas at run time (a ConfigError naming batch.replicas).
void run_pipelined_pretraining(Device& device, const std::vector<Device*>& stage_devices,
                               const RunConfig& config, bool compile_only,
                               const PretrainObserver& observer, const PretrainingData& data,
                               const std::set<std::int64_t>& recompute, PretrainResult& result);

}  // namespace polyhal
