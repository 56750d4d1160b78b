#pragma once
// Pre-training with model.pipeline: the stages' plans and estimate, and the
// run through the 1F1B schedule (pipelined_training.hpp).
#include <set>

#include "polyhal/pretrain_task.hpp"
#include "polyhal/pretraining_data.hpp"

namespace polyhal {

/// Fills `result` (stages already set): per-stage memory, the estimate with
/// the pipeline's ramp, and with `compile_only` false the steps. Replica r's
/// stage s runs on stage_devices[r x S + s] when there is one device per
/// stage of every replica (the modelled IPUs of a POD), else on `device`
/// (the CPU). Replicas are batch.replicas threads, or one per MPI rank with
/// `across_processes`: each stage's gradients are averaged over them, and
/// optimizer.shard_state shards each stage's state. Loss scaling, clipping
/// by the global norm over all stages, checkpoints and resume as unpipelined.
/// Returns the trained weights (empty when nothing was trained).
TensorMap run_pipelined_pretraining(Device& device, const std::vector<Device*>& stage_devices,
                                    const RunConfig& config, bool compile_only,
                                    const PretrainObserver& observer, const PretrainingData& data,
                                    const std::set<std::int64_t>& recompute,
                                    Communicator* across_processes, PretrainResult& result);

}  // namespace polyhal
