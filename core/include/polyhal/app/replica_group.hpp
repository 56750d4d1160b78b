#pragma once
/// @file replica_group.hpp
/// The data-parallel replicas this process runs: one replica per MPI rank
/// (the communicator mpirun gives), several as threads sharing a device (an
/// in-process group), or a single one.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/engine_communicator.hpp"
#include "polyhal/collective.hpp"

namespace polyhal {

/// The backend's collective engine for a group (Device::collective_engine,
/// collective.plugin_engine), with the deadline of each of its calls.
struct GroupEngine {
  std::shared_ptr<CollectiveEngine> engine;  ///< nullptr: the core's engines run everything
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

class ReplicaGroup {
 public:
  /// With `across_processes`, this process is one replica of it (and
  /// `local_replicas` must be 1); otherwise `local_replicas` threads. With
  /// `engine.engine` and more than one replica in the job, every collective
  /// is offered to that engine first (EngineCommunicator).
  ReplicaGroup(int local_replicas, Communicator* across_processes, GroupEngine engine = {});
  ~ReplicaGroup();
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  /// Replicas in this process.
  int local_count() const noexcept { return static_cast<int>(communicators_.size()); }
  /// Replicas in the whole job.
  int total() const noexcept { return communicators_.front()->size(); }
  /// The communicator of local replica `local` (0 .. local_count()-1).
  Communicator& communicator(int local) const {
    return *communicators_.at(static_cast<std::size_t>(local));
  }

  /// Runs `replica(local)` for every local replica, as threads when there
  /// are several. A replica that throws leaves the group, so the others stop
  /// at their next collective with ReplicaStopped instead of waiting; the
  /// exception rethrown is the cause: the first failure that is not a
  /// ReplicaStopped (or a ReplicaStopped when nothing else failed).
  void run(const std::function<void(int)>& replica);

  /// The backend's engine in front of this group's collectives, if any.
  const std::shared_ptr<CollectiveEngine>& engine() const noexcept { return engine_; }
  /// What it did, summed over the local replicas (nullopt without one).
  std::optional<CollectiveEngineCounts> engine_counts() const;

 private:
  void wrap(GroupEngine engine);

  std::unique_ptr<InProcessGroup> group_;
  std::vector<std::unique_ptr<Communicator>> owned_;
  std::shared_ptr<CollectiveEngine> engine_;
  // Declared after owned_: destroyed first, while the transports still live.
  std::vector<std::unique_ptr<EngineCommunicator>> offered_;
  std::vector<Communicator*> communicators_;
};

}  // namespace polyhal
