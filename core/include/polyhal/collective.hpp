#pragma once
/// @file collective.hpp
/// Collective: a communicator over ranks.
///
/// Buffers are plain host memory of `count` elements of `type`; f16 and bf16
/// are reduced in f32 and rounded once at the end. Every rank must call the
/// same collectives in the same order with the same counts.
#include <cstddef>
#include <cstdint>
#include <memory>
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
  /// "step 12, gradient of X" (either part left out when unset).
  std::string context() const;

 private:
  std::int64_t step_ = 0;
  std::string purpose_;
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
