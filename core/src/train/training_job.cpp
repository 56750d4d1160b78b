#include "train/training_job.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/pipelined_training.hpp"
#include "polyhal/error.hpp"
#include "util/atomic_file.hpp"

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

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw RuntimeFailure(fmt::format("{}: cannot read", file.string()));
  return text.str();
}

}  // namespace

TrainingJob::TrainingJob(const TrainingJobOptions& options, const TrainingPlacement& where)
    : options_(options), where_(where) {
  Communicator* across = where_.across_processes;
  local_replicas_ = across ? 1 : options_.batch.replicas;
  sharded_ = options_.shard_state && options_.batch.replicas > 1;
  if (options_.shard_state && options_.batch.replicas == 1)
    spdlog::warn("optimizer.shard_state: one replica, nothing to shard");
  if (!options_.compile_only) group_ = std::make_unique<ReplicaGroup>(local_replicas_, across);
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
          static_cast<double>(options_.batch.global()) * options_.sequences_per_row};
}

void TrainingJob::set_sequences_per_row(double sequences) {
  options_.sequences_per_row = sequences;
  plan_.estimate = replicas_.front()->estimate(*where_.device, step_work());
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
  std::optional<CheckpointStore::Checkpoint> checkpoint;
  if (resume) {
    if (const auto latest = store.latest()) checkpoint = CheckpointStore::load(*latest);
  }
  if (!checkpoint) {
    const TensorMap weights = start_weights();
    for (auto& replica : replicas_) replica->load_weights(weights);
    return 0;
  }
  if (check) check(*checkpoint);
  // Every replica starts from the same state.
  for (auto& replica : replicas_) replica->load_state(checkpoint->state, checkpoint->step);
  scaler.restore(checkpoint->metadata);
  spdlog::info("resumed from {} at step {}", checkpoint->path.string(), checkpoint->step);
  return checkpoint->step;
}

void TrainingJob::run(const std::function<void(TrainingModel&, Communicator&)>& replica) {
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

void export_hf_directory(const std::filesystem::path& dir, const BertConfig& model,
                         const TaskHead& head, const TensorMap& weights,
                         const std::filesystem::path& vocab) {
  std::filesystem::create_directories(dir);
  write_hf_config(model, dir / "config.json", head);
  save_bert_weights(weights, DType::f32, dir / "model.safetensors");
  if (!vocab.empty() &&
      std::filesystem::absolute(vocab) != std::filesystem::absolute(dir / "vocab.txt"))
    detail::write_file_atomically(dir / "vocab.txt", read_text(vocab));
}

}  // namespace polyhal
