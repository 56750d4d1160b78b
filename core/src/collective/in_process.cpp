#include <fmt/format.h>
#include <xmmintrin.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collective/reduction.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

/// What the ranks of one group share: a barrier and one posting slot each.
struct InProcessGroup::State {
  struct Slot {
    const void* send = nullptr;
    void* recv = nullptr;
    std::size_t count = 0;
    DType type = DType::f32;
  };
  explicit State(int n) : size(n), meeting(n), slots(static_cast<std::size_t>(n)) {}
  int size;
  std::barrier<> meeting;
  std::vector<Slot> slots;
  std::atomic<bool> abandoned{false};
  std::atomic<int> abandoned_by{-1};

  /// Waits for every rank; throws on every rank once one has abandoned the group.
  void meet(int rank) {
    meeting.arrive_and_wait();
    if (abandoned.load()) {
      throw ReplicaStopped(rank, abandoned_by.load());
    }
  }
};

namespace {

constexpr std::size_t kBlock = 4096;  // elements reduced at a time in f32 scratch
constexpr std::size_t kStreamFrom = std::size_t{1} << 20;  // elements: 4 MiB slices and up

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessGroup::State& state, int rank)
      : state_(state), rank_(rank), acc_(kBlock), next_(kBlock) {}

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return state_.size; }

  void all_reduce(void* data, std::size_t count, DType type, ReduceOp op) override {
    detail::require_reducible(type);
    post(data, data, count, type);
    // Rank r owns the slice [lo, hi): it reads that slice from every rank and
    // writes the result back to every rank. Slices are disjoint, so all ranks
    // work at once without a lock.
    const auto [lo, hi] = slice(count);
    if (type == DType::f32) {
      reduce_f32_in_place(lo, hi, op);
      state_.meet(rank_);
      return;
    }
    for (std::size_t begin = lo; begin < hi; begin += kBlock) {
      const std::size_t n = std::min(kBlock, hi - begin);
      reduce_block(begin, n, type, op, [&](int r) { return state_.slots[r].recv; });
      for (auto& slot : state_.slots) detail::store_f32(acc_.data(), slot.recv, type, begin, n);
    }
    state_.meet(rank_);
  }

  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                      ReduceOp op) override {
    detail::require_reducible(type);
    post(send, recv, recv_count, type);
    const std::size_t base = static_cast<std::size_t>(rank_) * recv_count;
    for (std::size_t begin = 0; begin < recv_count; begin += kBlock) {
      const std::size_t n = std::min(kBlock, recv_count - begin);
      reduce_block(base + begin, n, type, op, [&](int r) { return state_.slots[r].send; });
      detail::store_f32(acc_.data(), recv, type, begin, n);
    }
    state_.meet(rank_);  // others may reuse their send buffers only now
  }

  void all_gather(const void* send, void* recv, std::size_t send_count, DType type) override {
    post(send, recv, send_count, type);
    const std::size_t bytes = send_count * dtype_size(type);
    for (int r = 0; r < state_.size; ++r) {
      std::memcpy(static_cast<char*>(recv) + static_cast<std::size_t>(r) * bytes,
                  state_.slots[r].send, bytes);
    }
    state_.meet(rank_);
  }

  void broadcast(void* data, std::size_t count, DType type, int root) override {
    if (root < 0 || root >= state_.size) {
      throw RuntimeFailure(
          fmt::format("broadcast root {} outside a {}-rank group", root, state_.size));
    }
    post(data, data, count, type);
    if (rank_ != root) std::memcpy(data, state_.slots[root].send, count * dtype_size(type));
    state_.meet(rank_);
  }

  void barrier() override { state_.meet(rank_); }

 private:
  /// Publishes this rank's buffers and waits for everyone; all ranks check
  /// that the calls match, so all of them throw together if not.
  void post(const void* send, void* recv, std::size_t count, DType type) {
    state_.slots[rank_] = {send, recv, count, type};
    state_.meet(rank_);
    for (int r = 0; r < state_.size; ++r) {
      const auto& s = state_.slots[r];
      if (s.count != count || s.type != type) {
        state_.meet(rank_);
        throw RuntimeFailure(
            fmt::format("collective mismatch: rank {} passed {} x {}, rank {} passed {} x {}",
                        rank_, count, dtype_name(type), r, s.count, dtype_name(s.type)));
      }
    }
  }

  /// f32 all-reduce of elements [lo, hi) straight in the ranks' buffers: one
  /// read of each rank's element and one write back, no staging copies (the
  /// bf16/f16 path widens through scratch). Same rank order and the same
  /// division for mean as reduce_block, so both paths agree bit for bit.
  void reduce_f32_in_place(std::size_t lo, std::size_t hi, ReduceOp op) {
    const int ranks = state_.size;
    std::vector<float*> buffers(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) buffers[r] = static_cast<float*>(state_.slots[r].recv);
    const float divisor = static_cast<float>(ranks);
    if (ranks == 2) {  // the common pair: one fused pass, no staging at all
      float* __restrict a = buffers[0];
      float* __restrict b = buffers[1];
      // Large slices use streaming stores (SSE2, in every x86-64): the
      // result is not read again soon, and bypassing the cache is what lets
      // memcpy itself reach full bandwidth on big buffers.
      const bool stream = hi - lo >= kStreamFrom && (reinterpret_cast<std::uintptr_t>(a) % 16) ==
                                                        (reinterpret_cast<std::uintptr_t>(b) % 16);
      const auto pass = [&](auto combine, auto combine4) {
        std::size_t i = lo;
        if (stream) {
          for (; i < hi && reinterpret_cast<std::uintptr_t>(a + i) % 16 != 0; ++i)
            a[i] = b[i] = combine(a[i], b[i]);
          for (; i + 4 <= hi; i += 4) {
            const __m128 v = combine4(_mm_load_ps(a + i), _mm_load_ps(b + i));
            _mm_stream_ps(a + i, v);
            _mm_stream_ps(b + i, v);
          }
          _mm_sfence();
        }
        for (; i < hi; ++i) a[i] = b[i] = combine(a[i], b[i]);
      };
      if (op == ReduceOp::max) {
        pass([](float x, float y) { return std::max(x, y); },
             [](__m128 x, __m128 y) { return _mm_max_ps(x, y); });
      } else if (op == ReduceOp::mean) {
        const __m128 d = _mm_set1_ps(divisor);
        pass([divisor](float x, float y) { return (x + y) / divisor; },
             [d](__m128 x, __m128 y) { return _mm_div_ps(_mm_add_ps(x, y), d); });
      } else {
        pass([](float x, float y) { return x + y; },
             [](__m128 x, __m128 y) { return _mm_add_ps(x, y); });
      }
      return;
    }
    for (std::size_t begin = lo; begin < hi; begin += kBlock) {
      const std::size_t end = std::min(hi, begin + kBlock);
      float* acc = acc_.data();
      std::copy(buffers[0] + begin, buffers[0] + end, acc);
      for (int r = 1; r < ranks; ++r) detail::accumulate(acc, buffers[r] + begin, end - begin, op);
      if (op == ReduceOp::mean)
        for (std::size_t i = 0; i < end - begin; ++i) acc[i] /= divisor;
      for (int r = 0; r < ranks; ++r) std::copy(acc, acc + (end - begin), buffers[r] + begin);
    }
  }

  std::pair<std::size_t, std::size_t> slice(std::size_t count) const {
    const std::size_t n = static_cast<std::size_t>(state_.size);
    const std::size_t r = static_cast<std::size_t>(rank_);
    return {count * r / n, count * (r + 1) / n};
  }

  /// acc_[0..n) = reduction over ranks (in rank order, so every rank gets the
  /// same bits) of elements [begin, begin+n) of buffer(r).
  template <class BufferOf>
  void reduce_block(std::size_t begin, std::size_t n, DType type, ReduceOp op, BufferOf buffer) {
    detail::load_f32(buffer(0), type, begin, n, acc_.data());
    for (int r = 1; r < state_.size; ++r) {
      detail::load_f32(buffer(r), type, begin, n, next_.data());
      detail::accumulate(acc_.data(), next_.data(), n, op);
    }
    if (op == ReduceOp::mean) {
      const float ranks = static_cast<float>(state_.size);
      for (std::size_t i = 0; i < n; ++i) acc_[i] /= ranks;
    }
  }

  InProcessGroup::State& state_;
  int rank_;
  std::vector<float> acc_;
  std::vector<float> next_;
};

}  // namespace

InProcessGroup::InProcessGroup(int size) {
  if (size < 1)
    throw RuntimeFailure(fmt::format("an in-process group needs at least 1 rank, got {}", size));
  state_ = std::make_unique<State>(size);
}
InProcessGroup::~InProcessGroup() = default;
int InProcessGroup::size() const noexcept {
  return state_->size;
}

void InProcessGroup::abandon(int rank) {
  int none = -1;
  state_->abandoned_by.compare_exchange_strong(none, rank);
  state_->abandoned = true;
  state_->meeting.arrive_and_drop();
}

std::unique_ptr<Communicator> InProcessGroup::communicator(int rank) {
  if (rank < 0 || rank >= state_->size) {
    throw RuntimeFailure(fmt::format("rank {} outside a {}-rank group", rank, state_->size));
  }
  return std::make_unique<InProcessCommunicator>(*state_, rank);
}

}  // namespace polyhal
