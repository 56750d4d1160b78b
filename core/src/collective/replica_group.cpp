#include "polyhal/app/replica_group.hpp"

#include <exception>
#include <stdexcept>
#include <thread>

#include "polyhal/error.hpp"

namespace polyhal {

ReplicaGroup::ReplicaGroup(int local_replicas, Communicator* across_processes, GroupEngine engine) {
  if (local_replicas < 1) throw std::invalid_argument("ReplicaGroup: at least one replica");
  if (across_processes) {
    if (local_replicas != 1)
      throw std::invalid_argument("ReplicaGroup: one replica per process under MPI");
    communicators_.push_back(across_processes);
    wrap(std::move(engine));
    return;
  }
  if (local_replicas == 1) {
    owned_.push_back(make_single_rank_communicator());
  } else {
    group_ = std::make_unique<InProcessGroup>(local_replicas);
    for (int r = 0; r < local_replicas; ++r) owned_.push_back(group_->communicator(r));
  }
  for (auto& c : owned_) communicators_.push_back(c.get());
  wrap(std::move(engine));
}

ReplicaGroup::~ReplicaGroup() = default;

void ReplicaGroup::wrap(GroupEngine engine) {
  if (!engine.engine || total() < 2) return;
  engine_ = std::move(engine.engine);
  for (auto& communicator : communicators_) {
    offered_.push_back(
        std::make_unique<EngineCommunicator>(*communicator, engine_, engine.timeout));
    communicator = offered_.back().get();
  }
}

std::optional<CollectiveEngineCounts> ReplicaGroup::engine_counts() const {
  if (!engine_) return std::nullopt;
  CollectiveEngineCounts sum;
  for (const auto& offered : offered_) {
    const auto& c = offered->counts();
    sum.run += c.run;
    sum.refused += c.refused;
    sum.modelled_seconds += c.modelled_seconds;
    sum.modelled = sum.modelled || c.modelled;
  }
  return sum;
}

void ReplicaGroup::run(const std::function<void(int)>& replica) {
  if (local_count() == 1) {
    replica(0);
    return;
  }
  std::vector<std::exception_ptr> failures(communicators_.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < local_count(); ++r) {
    threads.emplace_back([&, r] {
      try {
        replica(r);
      } catch (...) {
        failures[static_cast<std::size_t>(r)] = std::current_exception();
        group_->abandon(r);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::exception_ptr cause, consequence;
  for (const auto& failure : failures) {
    if (!failure) continue;
    try {
      std::rethrow_exception(failure);
    } catch (const ReplicaStopped&) {
      if (!consequence) consequence = failure;
    } catch (...) {
      cause = failure;
    }
    if (cause) break;
  }
  if (cause) std::rethrow_exception(cause);
  if (consequence) std::rethrow_exception(consequence);
}

}  // namespace polyhal
