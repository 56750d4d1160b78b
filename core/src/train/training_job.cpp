#include "train/training_job.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/pipelined_training.hpp"
#include "polyhal/error.hpp"
#include "train/estimated_timeline.hpp"
#include "util/atomic_file.hpp"
#include "util/crc32c.hpp"
#include "util/directory_lock.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

/// The devices of pipelined replica `replica`: stage s on opened[replica x
/// S + s] when the backend opened one per stage of every replica, else
/// every stage on `device`.
std::vector<Device*> pipeline_devices(Device& device, const std::vector<Device*>& opened,
                                      int replica, int stages) {
  std::vector<Device*> devices(static_cast<std::size_t>(stages), &device);
  const auto first = static_cast<std::size_t>(replica) * devices.size();
  if (opened.size() >= first + devices.size())
    std::copy_n(opened.begin() + static_cast<std::ptrdiff_t>(first), devices.size(),
                devices.begin());
  return devices;
}

}  // namespace

TrainingJob::TrainingJob(const TrainingJobOptions& options, const TrainingPlacement& where)
    : options_(options), where_(where) {
  Communicator* across = where_.across_processes;
  local_replicas_ = across ? 1 : options_.batch.replicas;
  sharded_ = options_.shard_state && options_.batch.replicas > 1;
  if (options_.shard_state && options_.batch.replicas == 1)
    spdlog::warn("optimizer.shard_state: one replica, nothing to shard");
  if (!options_.compile_only) {
    GroupEngine engine;
    engine.timeout = options_.collective_timeout;
    if (options_.plugin_collectives) engine.engine = where_.device->collective_engine();
    group_ = std::make_unique<ReplicaGroup>(local_replicas_, across, std::move(engine));
  }
  replicas_.push_back(make_replica(0));
  TrainingModel& first = *replicas_.front();
  if (sharded_) {
    unsharded_ = first.plan(*where_.device, step_work()).memory;
    if (group_) {
      first.shard_optimizer_state(group_->communicator(0));
    } else {
      // Plans one replica's shard with a stand-in group of the run's size
      // (no collective runs at compile time).
      stand_in_ = std::make_unique<InProcessGroup>(options_.batch.replicas);
      stand_in_rank_ = stand_in_->communicator(0);
      first.shard_optimizer_state(*stand_in_rank_);
    }
  }
  plan_ = first.plan(*where_.device, step_work());
  count_every_local_replica();
}

void TrainingJob::count_every_local_replica() {
  // Local replicas of a whole model share the one host device: each holds
  // its own weights, state, activations and kernels. (A device model plans
  // one device, each replica on its own; pipelined replicas take their own
  // devices.)
  if (local_replicas_ < 2 || where_.device->properties().mode == DeviceMode::model ||
      !options_.stages.empty())
    return;
  std::vector<MemoryItem> items;
  for (MemoryItem item : plan_.memory.items) {
    item.name = fmt::format("{} (x {} replicas)", item.name, local_replicas_);
    item.bytes *= static_cast<std::uint64_t>(local_replicas_);
    items.push_back(std::move(item));
  }
  auto notes = plan_.memory.notes;
  plan_.memory = where_.device->plan_memory(items);
  plan_.memory.notes.insert(plan_.memory.notes.begin(), notes.begin(), notes.end());
}

TrainingJob::~TrainingJob() = default;

std::unique_ptr<TrainingModel> TrainingJob::make_replica(int replica) const {
  const BertShape shape{options_.batch.micro, options_.seq_len};
  if (options_.stages.empty()) {
    return whole_model(
        std::make_unique<BertTraining>(*where_.device, options_.model, shape, options_.training));
  }
  const int first_replica = where_.across_processes ? where_.across_processes->rank() : 0;
  const auto devices = pipeline_devices(*where_.device, where_.devices, first_replica + replica,
                                        static_cast<int>(options_.stages.size()));
  return pipelined_model(std::make_unique<PipelinedTraining>(devices, options_.model, shape,
                                                             options_.training, options_.stages));
}

StepWork TrainingJob::step_work() const {
  // Packed rows: a row costs what an unpacked one does and holds more sequences.
  return {static_cast<int>(options_.batch.grad_accum), options_.batch.replicas,
          static_cast<double>(options_.batch.global()) * options_.sequences_per_row,
          options_.overlap_bucket_bytes};
}

void TrainingJob::set_sequences_per_row(double sequences) {
  options_.sequences_per_row = sequences;
  plan_.estimate = replicas_.front()->estimate(*where_.device, step_work());
}

std::optional<std::string> TrainingJob::collective_engine_note(std::int64_t steps) const {
  if (!group_) return std::nullopt;
  const auto counts = group_->engine_counts();
  if (!counts) return std::nullopt;
  const auto local = static_cast<std::uint64_t>(group_->local_count());
  std::string note = fmt::format(
      "collectives: the backend's engine '{}' ran {} calls per replica; it refused {}, which "
      "polyhal's own engine ran",
      group_->engine()->name(), counts->run / local, counts->refused / local);
  if (counts->modelled) {
    const double per_replica = counts->modelled_seconds / static_cast<double>(local);
    note += fmt::format(
        "; modelled link time {:.2f} ms{} (a model, not measured)", per_replica * 1e3,
        steps > 0
            ? fmt::format(", {:.3f} ms per step", per_replica * 1e3 / static_cast<double>(steps))
            : "");
  }
  return note;
}

bool TrainingJob::lead() const noexcept {
  return !where_.across_processes || where_.across_processes->rank() == 0;
}

std::int64_t TrainingJob::start(const CheckpointStore& store, bool resume,
                                const std::function<TensorMap()>& start_weights, LossScaler& scaler,
                                const ResumeCheck& check) {
  if (!group_) throw std::logic_error("TrainingJob::start on a plan-only job");
  for (int r = 1; r < local_replicas_; ++r) {
    replicas_.push_back(make_replica(r));
    if (sharded_) replicas_.back()->shard_optimizer_state(group_->communicator(r));
  }
  if (!store.enabled() && lead())
    spdlog::warn(
        "checkpoint.dir is not set: this run keeps no checkpoint, so a crash, a lost replica or "
        "Ctrl-C loses its training; set checkpoint.dir to be able to resume");
  if (store.enabled() && lead()) {
    checkpoint_lock_ = std::make_unique<detail::DirectoryLock>(store.dir(), "checkpoint.dir");
    for (const auto& file : store.remove_stale_temporaries())
      spdlog::info("removed {}: the temporary file of a checkpoint write that was killed",
                   file.string());
  }
  std::optional<CheckpointStore::Checkpoint> checkpoint;
  if (resume) {
    if (const auto latest = store.latest()) checkpoint = CheckpointStore::load(*latest);
  }
  TensorMap weights;
  if (!checkpoint) weights = start_weights();
  if (where_.across_processes)
    agree_on_start(*where_.across_processes, checkpoint, checkpoint ? checkpoint->state : weights);
  if (!checkpoint) {
    for (auto& replica : replicas_) replica->load_weights(weights);
    return 0;
  }
  if (check) check(*checkpoint);
  // Every replica starts from the same state.
  // A state of the wrong shape is named with its file (a checkpoint
  // written by another model, or edited).
  try {
    for (auto& replica : replicas_) replica->load_state(checkpoint->state, checkpoint->step);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", checkpoint->path.string(), e.what()));
  }
  scaler.restore(checkpoint->metadata);
  spdlog::info("resumed from {} at step {}", checkpoint->path.string(), checkpoint->step);
  warn_if_the_batch_changed(*checkpoint);
  resumed_ = ResumedFrom{checkpoint->path, checkpoint->step, std::nullopt};
  if (const auto loss = checkpoint->metadata.find("loss"); loss != checkpoint->metadata.end()) {
    try {
      resumed_->loss = std::stod(loss->second);
    } catch (const std::exception&) {  // a checkpoint of another writer: no loss to show
    }
  }
  return checkpoint->step;
}

void TrainingJob::warn_if_the_batch_changed(const CheckpointStore::Checkpoint& checkpoint) const {
  if (!lead()) return;
  const auto written = [&](const char* key) -> std::string {
    const auto it = checkpoint.metadata.find(key);
    return it == checkpoint.metadata.end() ? std::string() : it->second;
  };
  const std::string global = std::to_string(options_.batch.global());
  const std::string replicas = std::to_string(options_.batch.replicas);
  const std::string was_global = written("global_batch"), was_replicas = written("replicas");
  if ((!was_global.empty() && was_global != global) ||
      (!was_replicas.empty() && was_replicas != replicas))
    spdlog::warn(
        "{} was written by a run with global batch {} over {} replicas; this run has global "
        "batch {} over {} replicas. It resumes at step {} all the same: the samples seen and the "
        "learning-rate schedule now follow this run's batch",
        checkpoint.path.string(), was_global.empty() ? "?" : was_global,
        was_replicas.empty() ? "?" : was_replicas, global, replicas, checkpoint.step + 1);
}

namespace {

/// CRC-32Cs of a start state: of its tensors' names and shapes (the model
/// every rank builds) and of their values (what it starts from).
std::array<std::int64_t, 2> digests_of(const TensorMap& state) {
  std::uint32_t shapes = 0, values = 0;
  for (const auto& [name, tensor] : state) {
    shapes = detail::crc32c_extend(shapes, name.data(), name.size() + 1);
    shapes = detail::crc32c_extend(shapes, tensor.shape.data(),
                                   tensor.shape.size() * sizeof(std::int64_t));
    values =
        detail::crc32c_extend(values, tensor.values.data(), tensor.values.size() * sizeof(float));
  }
  return {shapes, values};
}

}  // namespace

void agree_on_start(Communicator& ranks,
                    const std::optional<CheckpointStore::Checkpoint>& checkpoint,
                    const TensorMap& state) {
  // Every rank says where it starts (-1: from the start weights), and what:
  // ranks that start apart would all-reduce two different models.
  const auto [shapes, values] = digests_of(state);
  const std::array<std::int64_t, 3> mine{checkpoint ? checkpoint->step : -1, shapes, values};
  std::vector<std::int64_t> gathered(3 * static_cast<std::size_t>(ranks.size()));
  ranks.set_purpose("where and what each rank starts from");
  ranks.all_gather(mine.data(), gathered.data(), mine.size(), DType::i64);
  std::vector<std::int64_t> steps;
  for (std::size_t r = 0; r < gathered.size(); r += 3) steps.push_back(gathered[r]);
  const auto where = [](std::int64_t step) {
    return step < 0 ? std::string("the start weights (no checkpoint found)")
                    : fmt::format("the checkpoint of step {}", step);
  };
  const auto this_rank = [&](std::size_t r) {
    return ranks.rank() == 0 || ranks.rank() == static_cast<int>(r)
               ? fmt::format(" (this is rank {}{})", ranks.rank(),
                             checkpoint ? ": " + checkpoint->path.string() : "")
               : std::string();
  };
  for (std::size_t r = 1; r < steps.size(); ++r) {
    if (steps[r] != steps[0]) continue;
    if (gathered[3 * r + 1] != gathered[1])
      throw ConfigError(fmt::format(
          "ranks build different models: rank {}'s {} hold other tensor names or shapes than "
          "rank 0's{} (a model.hf_config, model.* dimension or checkpoint that differs between "
          "nodes): every rank must train the same model",
          r, where(steps[r]), this_rank(r)));
    if (gathered[3 * r + 2] != gathered[2])
      throw ConfigError(fmt::format(
          "ranks start from different weights: rank {}'s {} hold other values than rank 0's{} "
          "(node-local copies of checkpoint.init, model.weights or a checkpoint directory that "
          "differ): give every rank the same files",
          r, where(steps[r]), this_rank(r)));
  }
  for (std::size_t r = 1; r < steps.size(); ++r) {
    if (steps[r] == steps[0]) continue;
    throw ConfigError(fmt::format(
        "ranks start from different places: rank 0 from {}, rank {} from {}{}. Every rank must "
        "resume from the same checkpoint: give them one checkpoint.dir on a shared filesystem, "
        "or copy the newest checkpoint to every rank's directory",
        where(steps[0]), r, where(steps[r]), this_rank(r)));
  }
}

void TrainingJob::trace(StepTrace& trace) {
  if (!trace.estimated()) {
    trace_ = &trace;
    return;
  }
  const StepWork work = step_work();
  TraceLane& lane = trace.lane(0);
  double t = 0;
  for (std::int64_t step = trace.window().first; step <= trace.window().last; ++step) {
    const auto end = replicas_.front()->trace_estimated_step(lane, *where_.device, work, step, t);
    if (!end) throw RuntimeFailure("--profile: the device model gives no estimate of a step");
    t = *end;
  }
  trace.set_metadata("estimated_step_seconds",
                     t / 1e6 / static_cast<double>(trace.window().size()));
  trace.set_metadata("replicas", work.replicas);
  trace.set_metadata("shown", "replica 0: every replica runs the same schedule");
  trace.set_metadata("kernels_shown_for_micro_batches", kTracedKernelMicroBatches);
}

void TrainingJob::run(const std::function<void(TrainingModel&, Communicator&)>& replica) {
  if (trace_)
    for (int r = 0; r < local_replicas_; ++r)
      replicas_[static_cast<std::size_t>(r)]->attach_trace(
          trace_->lane(group_->communicator(r).rank()));
  group_->run(
      [&](int r) { replica(*replicas_[static_cast<std::size_t>(r)], group_->communicator(r)); });
}

TensorMap TrainingJob::weights() const {
  return replicas_.front()->weights();
}

std::vector<OpTime> TrainingJob::profile() const {
  return replicas_.front()->profile();
}

TensorMap read_start_weights(const std::filesystem::path& file, const BertConfig& model,
                             const TaskHead& head, std::uint64_t seed) {
  HeadStart loaded = load_bert_weights_for_head(file, model, head, seed);
  check_state_values(file, loaded.weights);
  spdlog::info("weights: {} ({})", file.string(), hf_architecture(head));
  if (!loaded.extended.empty()) spdlog::info("{}", loaded.extended);
  if (!loaded.initialised.empty())
    spdlog::info("  newly initialised (not in the file): {}", fmt::join(loaded.initialised, ", "));
  if (!loaded.unused.empty()) {
    const std::size_t shown = std::min<std::size_t>(loaded.unused.size(), 4);
    spdlog::info("  not used by {}: {} tensors ({}{})", hf_architecture(head), loaded.unused.size(),
                 fmt::join(loaded.unused.begin(),
                           loaded.unused.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                 loaded.unused.size() > shown ? ", ..." : "");
  }
  return std::move(loaded.weights);
}

}  // namespace polyhal
