#include <fmt/format.h>

#include <cstring>

#include "collective/reduction.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// One replica: reductions over one rank leave the data as it is.
class SingleRankCommunicator final : public Communicator {
 public:
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  void all_reduce(void*, std::size_t, DType type, ReduceOp) override {
    detail::require_reducible(type);
  }
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                      ReduceOp) override {
    detail::require_reducible(type);
    std::memmove(recv, send, recv_count * dtype_size(type));
  }
  void all_gather(const void* send, void* recv, std::size_t send_count, DType type) override {
    std::memmove(recv, send, send_count * dtype_size(type));
  }
  void broadcast(void*, std::size_t, DType, int root) override {
    if (root != 0)
      throw RuntimeFailure(fmt::format("broadcast from rank {} in a 1-rank group", root));
  }
  void barrier() override {}
};

}  // namespace

Communicator::~Communicator() = default;

std::string Communicator::context() const {
  if (step_ > 0 && !purpose_.empty()) return fmt::format("step {}, {}", step_, purpose_);
  if (step_ > 0) return fmt::format("step {}", step_);
  return purpose_;
}

std::string_view reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::mean:
      return "mean";
    case ReduceOp::max:
      return "max";
  }
  return "?";
}

std::unique_ptr<Communicator> make_single_rank_communicator() {
  return std::make_unique<SingleRankCommunicator>();
}

}  // namespace polyhal
