#pragma once
/// @file engine_communicator.hpp
/// A backend's collective engine in front of the core's: every collective is
/// offered to the plugin's CollectiveEngine first (with its identity and
/// deadline, collective.hpp), and what the engine refuses runs on the core's
/// in-process or MPI communicator underneath. The engine's call runs on a
/// thread of this communicator so that one that hangs is given up at the
/// deadline with CollectiveTimeout (exit 4) instead of hanging the run.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/collective.hpp"

namespace polyhal {

/// What a plugin's engine did on one rank.
struct CollectiveEngineCounts {
  std::uint64_t run = 0;      ///< calls the engine ran
  std::uint64_t refused = 0;  ///< calls it refused, run by the core's engine
  /// Sum of the engine's estimate_seconds over the calls it ran (a device
  /// model's modelled link time); `modelled` says whether it gave any.
  double modelled_seconds = 0.0;
  bool modelled = false;
};

class EngineCommunicator final : public Communicator {
 public:
  /// `transport`: the core's communicator of this rank, which must outlive
  /// this one. `timeout`: the deadline of every call, from its start.
  EngineCommunicator(Communicator& transport, std::shared_ptr<CollectiveEngine> engine,
                     std::chrono::milliseconds timeout);
  ~EngineCommunicator() override;
  EngineCommunicator(const EngineCommunicator&) = delete;
  EngineCommunicator& operator=(const EngineCommunicator&) = delete;

  int rank() const noexcept override { return transport_.rank(); }
  int size() const noexcept override { return transport_.size(); }
  void all_reduce(void* data, std::size_t count, DType type, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, std::size_t send_count, DType type) override;
  void broadcast(void* data, std::size_t count, DType type, int root) override;
  void barrier() override;

  const CollectiveEngineCounts& counts() const noexcept { return counts_; }

  struct Worker;

 private:
  /// Offers `call` to the engine; runs `fallback` on the transport when it refuses.
  void offer(CollectiveCall call, const std::function<void()>& fallback);

  Communicator& transport_;
  std::shared_ptr<CollectiveEngine> engine_;
  std::chrono::milliseconds timeout_;
  std::uint64_t number_ = 0;
  CollectiveEngineCounts counts_;
  std::shared_ptr<Worker> worker_;
  std::thread thread_;
};

/// "all_reduce(1024 x f32, mean)", "broadcast(16 x i64, root 0)", "barrier".
std::string describe_collective(const CollectiveCall& call);

}  // namespace polyhal
