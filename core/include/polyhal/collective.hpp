#pragma once
/// @file collective.hpp
/// Collective: a communicator over ranks.
///
/// Buffers are plain host memory of `count` elements of `type`; f16 and bf16
/// are reduced in f32 and rounded once at the end. Every rank must call the
/// same collectives in the same order with the same counts.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "polyhal/dtype.hpp"

namespace polyhal {

enum class ReduceOp { sum, mean, max };
std::string_view reduce_op_name(ReduceOp op) noexcept;

class Communicator {
 public:
  virtual ~Communicator();
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// In place: every rank ends with the reduction of all ranks' `data`.
  virtual void all_reduce(void* data, std::size_t count, DType type, ReduceOp op) = 0;
  /// `send` has size()*recv_count elements; rank r receives the reduction of
  /// block r of every rank's `send`.
  virtual void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                              ReduceOp op) = 0;
  /// `recv` has size()*send_count elements: block r is rank r's `send`.
  virtual void all_gather(const void* send, void* recv, std::size_t send_count, DType type) = 0;
  /// In place: every rank ends with `root`'s data.
  virtual void broadcast(void* data, std::size_t count, DType type, int root) = 0;
  virtual void barrier() = 0;

  /// Names what the next collectives belong to, for the message a
  /// communicator gives when one stalls ("step 12, gradient of
  /// bert.encoder.layer.3.output.dense.weight"): the optimizer step (0: none)
  /// and what is being exchanged. Kept until changed; costs no communication.
  void set_step(std::int64_t step) noexcept { step_ = step; }
  void set_purpose(std::string purpose) { purpose_ = std::move(purpose); }
  std::int64_t step() const noexcept { return step_; }
  const std::string& purpose() const noexcept { return purpose_; }
  /// "step 12, gradient of X" (either part left out when unset).
  std::string context() const;

 private:
  std::int64_t step_ = 0;
  std::string purpose_;
};

/// The five collectives, as a plugin's CollectiveEngine is asked to run them.
enum class CollectiveOp { all_reduce, reduce_scatter, all_gather, broadcast, barrier };
std::string_view collective_op_name(CollectiveOp op) noexcept;

/// One collective call on one rank, with its identity: what a plugin's
/// CollectiveEngine receives. Every rank makes the same calls in the same
/// order, so `number`, `step`, `purpose` and the shape fields are equal on
/// every rank for the same call; only `rank`, the buffers and `transport`
/// differ.
struct CollectiveCall {
  CollectiveOp op = CollectiveOp::barrier;
  std::uint64_t number = 0;  ///< 1, 2, ...: this communicator's count of collectives
  std::int64_t step = 0;     ///< the optimizer step (0: none), as Communicator::set_step
  std::string purpose;       ///< e.g. "gradient of bert.pooler.dense.weight"; may be empty
  int rank = 0;
  int size = 1;
  /// all_reduce and broadcast work in place (send == recv); barrier has none.
  const void* send = nullptr;
  void* recv = nullptr;
  /// Elements: of the buffer (all_reduce, broadcast), of the block each rank
  /// receives (reduce_scatter) or sends (all_gather); 0 for barrier.
  std::size_t count = 0;
  DType type = DType::f32;
  ReduceOp reduce = ReduceOp::sum;  ///< all_reduce, reduce_scatter
  int root = 0;                     ///< broadcast
  /// The call must have returned by then (collective.timeout_seconds from its start).
  std::chrono::steady_clock::time_point deadline;
  /// The core's engine for this rank (in-process threads or MPI). An engine
  /// that models links it does not have moves the bytes through it, then
  /// prices the call with estimate_seconds.
  Communicator* transport = nullptr;
};

/// Runs `call` on `communicator`: what an engine that moves the bytes through
/// `call.transport` (a device model's) does with a call it takes.
void run_collective(Communicator& communicator, const CollectiveCall& call);

enum class CollectiveResult {
  done,     ///< the engine ran the call: every buffer holds its result
  refused,  ///< nothing was touched; the core's engine runs the call instead
};

/// A plugin's own collective engine (docs/plugin-authors.md, "Collectives"):
/// Backend::make_collective_engine returns one, or none, in which case the
/// core's in-process or MPI engine runs every collective. The rules:
///  - Refuse only by the call's shared fields (op, count, type, reduce, root,
///    size, number, step, purpose), never by rank: every rank must decide
///    alike, or the ranks wait for each other until the deadline.
///  - Refuse before touching a buffer or a peer. After that, finish the
///    call or throw; a polyhal::Error thrown ends the run with its exit
///    code and a message naming the engine and the call (no fallback: the
///    buffers may be half-reduced).
///  - Return by `deadline`. The core waits for the call on another thread and,
///    at the deadline, gives up on it: CollectiveTimeout (exit 4) names the
///    engine, the call and the step; the engine's thread is abandoned.
///  - run() is called concurrently from the threads of in-process replicas
///    (one per rank), never concurrently for one rank.
class CollectiveEngine {
 public:
  virtual ~CollectiveEngine();
  /// One line for logs and reports, e.g. "GCL over IPU-Links (modelled)".
  virtual std::string name() const = 0;
  virtual CollectiveResult run(const CollectiveCall& call) = 0;
  /// The call's time on the device's links when the engine models them
  /// (nullopt, the default: real links, measure instead). The core sums it
  /// per run for the report.
  virtual std::optional<double> estimate_seconds(const CollectiveCall& call) const;

 protected:
  CollectiveEngine() = default;
};

/// The communicator of a run with one replica: every collective is a copy or no-op.
std::unique_ptr<Communicator> make_single_rank_communicator();

/// Replicas of one process, one thread each, sharing memory. Create the group,
/// then hand `communicator(r)` to the thread of rank r. Reductions are split
/// by element range so every rank reduces its own slice in parallel; ranks
/// meet at a std::barrier, no global lock is taken.
class InProcessGroup {
 public:
  explicit InProcessGroup(int size);
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const noexcept;
  /// The communicator for `rank`; it refers to this group, which must outlive it.
  std::unique_ptr<Communicator> communicator(int rank);
  /// Rank `rank` leaves for good after a failure outside a collective: every
  /// other rank's current or next collective throws ReplicaStopped naming it,
  /// instead of waiting forever. Call once, from the failing rank's thread.
  void abandon(int rank);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace polyhal
