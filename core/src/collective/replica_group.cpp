#include "polyhal/app/replica_group.hpp"

#include <exception>
#include <stdexcept>
#include <thread>

#include "polyhal/error.hpp"

namespace polyhal {

ReplicaGroup::ReplicaGroup(int local_replicas, Communicator* across_processes) {
  if (local_replicas < 1) throw std::invalid_argument("ReplicaGroup: at least one replica");
  if (across_processes) {
    if (local_replicas != 1)
      throw std::invalid_argument("ReplicaGroup: one replica per process under MPI");
    communicators_.push_back(across_processes);
    return;
  }
  if (local_replicas == 1) {
    owned_.push_back(make_single_rank_communicator());
  } else {
    group_ = std::make_unique<InProcessGroup>(local_replicas);
    for (int r = 0; r < local_replicas; ++r) owned_.push_back(group_->communicator(r));
  }
  for (auto& c : owned_) communicators_.push_back(c.get());
}

ReplicaGroup::~ReplicaGroup() = default;

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
