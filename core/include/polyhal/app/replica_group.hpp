#pragma once
/// @file replica_group.hpp
/// The data-parallel replicas this process runs: one replica per MPI rank
/// (the communicator mpirun gives), several as threads sharing a device (an
/// in-process group), or a single one.
#include <functional>
#include <memory>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/collective.hpp"

namespace polyhal {

class ReplicaGroup {
 public:
  /// With `across_processes`, this process is one replica of it (and
  /// `local_replicas` must be 1); otherwise `local_replicas` threads.
  ReplicaGroup(int local_replicas, Communicator* across_processes);
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

 private:
  std::unique_ptr<InProcessGroup> group_;
  std::vector<std::unique_ptr<Communicator>> owned_;
  std::vector<Communicator*> communicators_;
};

}  // namespace polyhal
