#pragma once
// The collective engine of a device model (collective.hpp's
// CollectiveEngine). A modelled device computes in host memory, so the bytes
// move through the core's transport of the call; the engine's part is the
// links it models: which calls they take (the rest it refuses, and the core
// runs them) and what each call costs on them (estimate_seconds), from the
// same link model the device's all_reduce estimate uses.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "polyhal/collective.hpp"
#include "polyhal/error.hpp"

namespace polyhal::plugins {

class ModelledCollectiveEngine final : public CollectiveEngine {
 public:
  /// Seconds to all-reduce `bytes` over `replicas` devices on the model's links.
  using AllReduceSeconds = std::function<double(double bytes, std::int64_t replicas)>;
  /// Whether the modelled links take `call` (decided by its shared fields only).
  using Takes = std::function<bool(const CollectiveCall& call)>;

  ModelledCollectiveEngine(std::string name, AllReduceSeconds all_reduce, Takes takes)
      : name_(std::move(name)), all_reduce_(std::move(all_reduce)), takes_(std::move(takes)) {}

  std::string name() const override { return name_; }

  CollectiveResult run(const CollectiveCall& call) override {
    if (!takes_(call)) return CollectiveResult::refused;
    if (call.transport == nullptr)
      throw RuntimeFailure(name_ + ": a collective call without the core's transport");
    run_collective(*call.transport, call);
    return CollectiveResult::done;
  }

  /// Reduce-scatter and all-gather are each half of a bandwidth-optimal
  /// all-reduce of the whole buffer; a broadcast is priced as an
  /// all-gather of its buffer; a barrier as an all-reduce of nothing (the
  /// latency of its steps).
  std::optional<double> estimate_seconds(const CollectiveCall& call) const override {
    const double element = static_cast<double>(dtype_size(call.type));
    const double count = static_cast<double>(call.count);
    const double ranks = static_cast<double>(call.size);
    switch (call.op) {
      case CollectiveOp::all_reduce:
        return all_reduce_(count * element, call.size);
      case CollectiveOp::reduce_scatter:
      case CollectiveOp::all_gather:
        return all_reduce_(count * ranks * element, call.size) / 2.0;
      case CollectiveOp::broadcast:
        return all_reduce_(count * element, call.size) / 2.0;
      case CollectiveOp::barrier:
        return all_reduce_(0.0, call.size);
    }
    return std::nullopt;
  }

 private:
  std::string name_;
  AllReduceSeconds all_reduce_;
  Takes takes_;
};

}  // namespace polyhal::plugins
