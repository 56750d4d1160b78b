#pragma once
// One training job, for every training task: builds the training model
// (whole or pipelined) from one options struct, makes the replicas
// (threads of this process or one per MPI rank), plans one replica (with a
// stand-in group when the optimizer state is sharded), shards the state,
// starts from a checkpoint to resume or from start weights, and runs a
// Trainer per replica. Pre-training and fine-tuning differ only in their
// data, head and schedule.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/hf_directory.hpp"
#include "polyhal/app/loss_scaler.hpp"
#include "polyhal/app/replica_group.hpp"
#include "polyhal/app/step_trace.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"
#include "train/training_model.hpp"

namespace polyhal {

/// The batch terms of the seeds: global = replicas x grad_accum x micro.
struct BatchShape {
  std::int64_t micro = 1;
  std::int64_t grad_accum = 1;
  int replicas = 1;  ///< in the whole job (every process)
  std::int64_t global() const { return replicas * grad_accum * micro; }
};

struct TrainingJobOptions {
  BertConfig model;
  std::int64_t seq_len = 128;
  BatchShape batch;
  BertTrainingOptions training;
  /// Empty: the whole model on one device; else the pipeline's stages.
  std::vector<PipelineStage> stages;
  /// Replicated optimizer-state sharding (ZeRO stage 1) over every replica.
  bool shard_state = false;
  /// Sequences a row holds on average (packed rows: more than one), for the estimate.
  double sequences_per_row = 1.0;
  /// Plan only: no replica group is made and nothing is allocated.
  bool compile_only = false;
  /// The estimate's all-reduce overlaps backward in buckets of this many
  /// bytes (0: after it); the run decides by collective.overlap itself.
  std::size_t overlap_bucket_bytes = 0;
  /// Offer the collectives to the device's collective engine, when it has
  /// one (collective.plugin_engine), each call due within `collective_timeout`.
  bool plugin_collectives = true;
  std::chrono::milliseconds collective_timeout{std::chrono::minutes(5)};
};

/// Where a job runs. Unpipelined replicas share `device`; pipelined replica
/// r puts stage s on devices[r x S + s] when the backend opened one device
/// per stage of every replica (the IPUs of a POD), else on `device`. With
/// `across_processes` (the MPI communicator) this process is one replica.
struct TrainingPlacement {
  Device* device = nullptr;
  std::vector<Device*> devices;
  Communicator* across_processes = nullptr;
};

/// Checks a checkpoint found to resume from before it is used; throws
/// ConfigError when it belongs to another job.
using ResumeCheck = std::function<void(const CheckpointStore::Checkpoint&)>;

namespace detail {
class DirectoryLock;
}

class TrainingJob {
 public:
  /// Declares and plans the first replica (nothing allocated).
  TrainingJob(const TrainingJobOptions& options, const TrainingPlacement& where);
  ~TrainingJob();
  TrainingJob(const TrainingJob&) = delete;
  TrainingJob& operator=(const TrainingJob&) = delete;

  /// One replica's plan: its shard when the optimizer state is sharded.
  const TrainingPlan& plan() const noexcept { return plan_; }
  /// With a sharded optimizer state: the same replica's plan unsharded.
  const std::optional<MemoryReport>& unsharded_memory() const noexcept { return unsharded_; }
  /// Re-estimates the step once the data says how many sequences a row holds.
  void set_sequences_per_row(double sequences);
  bool sharded() const noexcept { return sharded_; }
  /// Rank 0 of the job: the one that reports and writes.
  bool lead() const noexcept;

  /// Makes every local replica and loads the state they all start from
  /// (the lead first locks the store's directory for the run: another run
  /// on it is a ConfigError naming the holder):
  /// the newest checkpoint in `store` when `resume` finds one (checked by
  /// `check`, loss scale restored into `scaler`), else `start_weights()`.
  /// Returns the optimizer steps already done.
  std::int64_t start(const CheckpointStore& store, bool resume,
                     const std::function<TensorMap()>& start_weights, LossScaler& scaler,
                     const ResumeCheck& check = {});
  /// Where start() resumed from (nullopt: it started from the start weights).
  struct ResumedFrom {
    std::filesystem::path checkpoint;
    std::int64_t step = 0;
    std::optional<double> loss;  ///< that step's loss, when its writer kept it
  };
  const std::optional<ResumedFrom>& resumed() const noexcept { return resumed_; }

  /// Runs `replica(model, communicator)` for every local replica, as
  /// threads when there are several (ReplicaGroup::run).
  void run(const std::function<void(TrainingModel&, Communicator&)>& replica);

  /// --profile. A measured trace: every local replica's kernel runs and
  /// host phases go on its lane while run() is in the window. An estimated
  /// one (a device model): replica 0's estimated timeline of the window's
  /// steps is laid out now, back to back from 0 (every replica runs the same
  /// schedule), also without start() for a plan only.
  void trace(StepTrace& trace);

  /// What the backend's collective engine did over the run, one line per
  /// replica's calls ("... ran 1204 calls, refused 8 ..."), or nullopt when
  /// no engine took part. `steps`: the optimizer steps run, for the per-step time.
  std::optional<std::string> collective_engine_note(std::int64_t steps) const;

  /// The first replica's weights and host profile (every replica holds the same weights).
  TensorMap weights() const;
  std::vector<OpTime> profile() const;

 private:
  std::unique_ptr<TrainingModel> make_replica(int replica) const;
  StepWork step_work() const;
  /// The plan of every local replica when they share the host device.
  void count_every_local_replica();
  /// Warns (lead only) when `checkpoint` was written with another global
  /// batch or replica count than this job's.
  void warn_if_the_batch_changed(const CheckpointStore::Checkpoint& checkpoint) const;

  TrainingJobOptions options_;
  TrainingPlacement where_;
  int local_replicas_ = 1;
  bool sharded_ = false;
  // The communicators outlive the replicas that hold them.
  std::unique_ptr<ReplicaGroup> group_;
  std::unique_ptr<InProcessGroup> stand_in_;
  std::unique_ptr<Communicator> stand_in_rank_;
  std::vector<std::unique_ptr<TrainingModel>> replicas_;
  std::unique_ptr<detail::DirectoryLock> checkpoint_lock_;
  std::optional<ResumedFrom> resumed_;
  StepTrace* trace_ = nullptr;  // a measured trace run() records  // the lead's, while it runs
  TrainingPlan plan_;
  std::optional<MemoryReport> unsharded_;
};

/// Every rank of a multi-process job (`ranks`) must start from the same
/// place: the same checkpoint step, or all from the start weights, of one
/// model (the same tensor names and shapes) with the same values; `state`
/// is what this rank starts from (the checkpoint's state or the start
/// weights). Gathers a CRC-32C of each before any state is loaded:
/// node-local copies that differ (a checkpoint.init, a checkpoint directory,
/// a model.hf_config) are a ConfigError naming both ranks (each rank throws
/// it), never replicas that silently diverge or all-reduce gradients of two
/// sizes.
void agree_on_start(Communicator& ranks,
                    const std::optional<CheckpointStore::Checkpoint>& checkpoint,
                    const TensorMap& state);

/// Reads the weights a job starts from (`file`: a pre-training checkpoint or
/// a weights file; its optimizer state is dropped) for `head`: tensors of
/// the head that the file lacks are freshly initialised with `seed`, a
/// shorter position table is extended with fresh rows (phase 2 from phase
/// 1), and both are logged, as are the file's tensors the head does not use.
/// Throws ConfigError naming the file and every problem.
TensorMap read_start_weights(const std::filesystem::path& file, const BertConfig& model,
                             const TaskHead& head, std::uint64_t seed);

}  // namespace polyhal
