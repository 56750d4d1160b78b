#pragma once
// What pre-training and fine-tuning share about a pipeline: which devices a
// replica's stages run on, and the plan of one replica (each stage's memory
// and the step's estimate).
#include <cstdint>
#include <optional>
#include <vector>

#include "polyhal/device.hpp"
#include "polyhal/pipelined_training.hpp"
#include "polyhal/pretrain_task.hpp"

namespace polyhal {

/// The devices of pipelined replica `replica`: stage s on opened[replica x
/// S + s] when the backend opened one per stage of every replica (the IPUs
/// of a POD), else every stage on `device` (the CPU).
std::vector<Device*> pipeline_devices(Device& device, const std::vector<Device*>& opened,
                                      int replica, int stages);

struct PipelinePlan {
  std::vector<MemoryReport> stage_memory;  ///< one per stage, stashes included
  MemoryReport memory;                     ///< the fullest stage's; fits when every stage does
  std::int64_t parameters = 0;
  std::optional<double> all_reduce;  ///< the largest stage's gradients over the replicas
  std::optional<TrainingStepEstimate> estimate;
};

/// One replica's plan with `accumulation` micro-batches of `micro` sequences
/// and `replicas` replicas (device models estimate; real devices do not).
/// `sequences_per_row`: packed rows hold more than one.
PipelinePlan plan_pipeline(const PipelinedTraining& pipeline, Device& device, int accumulation,
                           int replicas, std::int64_t micro, double sequences_per_row = 1.0);

}  // namespace polyhal
