#include "polyhal/app/engine_communicator.hpp"

#include <fmt/format.h>

#include <optional>

#include "polyhal/error.hpp"

namespace polyhal {

/// The hand-over between a rank's thread and the thread that calls the
/// engine. Shared with that thread, so an abandoned call can still finish
/// (or never) after the communicator is gone.
struct EngineCommunicator::Worker {
  std::shared_ptr<CollectiveEngine> engine;
  std::mutex mutex;
  std::condition_variable changed;
  std::optional<CollectiveCall> call;  // set: a call to run
  bool finished = false;
  CollectiveResult result = CollectiveResult::done;
  std::exception_ptr error;
  bool stop = false;

  void serve() {
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return stop || call.has_value(); });
      if (stop) return;
      const CollectiveCall current = *call;
      lock.unlock();
      CollectiveResult outcome = CollectiveResult::done;
      std::exception_ptr failure;
      // Not under call_into_plugin's exit guard: a call given up at its
      // deadline is still "in the plugin" when the run exits with code 4.
      try {
        outcome = engine->run(current);
      } catch (const std::exception&) {
        failure = std::current_exception();
      } catch (...) {
        failure = std::make_exception_ptr(RuntimeFailure(
            "it threw an exception of unknown type (not a std::exception): a fault of its plugin"));
      }
      lock.lock();
      call.reset();
      result = outcome;
      error = failure;
      finished = true;
      changed.notify_all();
    }
  }
};

CollectiveEngine::~CollectiveEngine() = default;

std::optional<double> CollectiveEngine::estimate_seconds(const CollectiveCall&) const {
  return std::nullopt;
}

std::string_view collective_op_name(CollectiveOp op) noexcept {
  switch (op) {
    case CollectiveOp::all_reduce:
      return "all_reduce";
    case CollectiveOp::reduce_scatter:
      return "reduce_scatter";
    case CollectiveOp::all_gather:
      return "all_gather";
    case CollectiveOp::broadcast:
      return "broadcast";
    case CollectiveOp::barrier:
      return "barrier";
  }
  return "?";
}

void run_collective(Communicator& communicator, const CollectiveCall& call) {
  switch (call.op) {
    case CollectiveOp::all_reduce:
      communicator.all_reduce(call.recv, call.count, call.type, call.reduce);
      return;
    case CollectiveOp::reduce_scatter:
      communicator.reduce_scatter(call.send, call.recv, call.count, call.type, call.reduce);
      return;
    case CollectiveOp::all_gather:
      communicator.all_gather(call.send, call.recv, call.count, call.type);
      return;
    case CollectiveOp::broadcast:
      communicator.broadcast(call.recv, call.count, call.type, call.root);
      return;
    case CollectiveOp::barrier:
      communicator.barrier();
      return;
  }
}

std::string describe_collective(const CollectiveCall& call) {
  const auto name = collective_op_name(call.op);
  const auto type = dtype_name(call.type);
  switch (call.op) {
    case CollectiveOp::all_reduce:
      return fmt::format("{}({} x {}, {})", name, call.count, type, reduce_op_name(call.reduce));
    case CollectiveOp::reduce_scatter:
      return fmt::format("{}({} x {} per rank, {})", name, call.count, type,
                         reduce_op_name(call.reduce));
    case CollectiveOp::all_gather:
      return fmt::format("{}({} x {} per rank)", name, call.count, type);
    case CollectiveOp::broadcast:
      return fmt::format("{}({} x {} from rank {})", name, call.count, type, call.root);
    case CollectiveOp::barrier:
      break;
  }
  return std::string(name);
}

EngineCommunicator::EngineCommunicator(Communicator& transport,
                                       std::shared_ptr<CollectiveEngine> engine,
                                       std::chrono::milliseconds timeout)
    : transport_(transport),
      engine_(std::move(engine)),
      timeout_(timeout),
      worker_(std::make_shared<Worker>()) {
  worker_->engine = engine_;
  thread_ = std::thread([worker = worker_] { worker->serve(); });
}

EngineCommunicator::~EngineCommunicator() {
  bool abandoned = false;
  {
    std::lock_guard lock(worker_->mutex);
    abandoned = worker_->call.has_value();
    worker_->stop = true;
  }
  worker_->changed.notify_all();
  // A call given up at its deadline may never return: its thread keeps the
  // worker (and through the engine, the plugin) alive until the process ends.
  if (abandoned)
    thread_.detach();
  else
    thread_.join();
}

void EngineCommunicator::offer(CollectiveCall call, const std::function<void()>& fallback) {
  call.number = ++number_;
  call.step = step();
  call.purpose = purpose();
  call.rank = transport_.rank();
  call.size = transport_.size();
  call.transport = &transport_;
  call.deadline = std::chrono::steady_clock::now() + timeout_;
  transport_.set_step(step());
  transport_.set_purpose(purpose());
  const auto where = [&] {
    const std::string at = context();
    return fmt::format("rank {} of {}: collective #{} {}{}", call.rank, call.size, call.number,
                       describe_collective(call), at.empty() ? "" : " at " + at);
  };
  CollectiveResult result = CollectiveResult::done;
  {
    std::unique_lock lock(worker_->mutex);
    if (worker_->call.has_value())
      throw CollectiveTimeout(fmt::format(
          "{}: collective engine '{}' still runs a call given up at its deadline; no further "
          "collective can run on this rank",
          where(), engine_->name()));
    worker_->finished = false;
    worker_->call = call;
    worker_->changed.notify_all();
    if (!worker_->changed.wait_until(lock, call.deadline, [&] { return worker_->finished; })) {
      throw CollectiveTimeout(fmt::format(
          "{}: collective engine '{}' did not finish within {:.1f} s (collective.timeout_seconds); "
          "the call is given up and the run ends. If the engine is at fault, set "
          "collective.plugin_engine: off to run every collective on polyhal's own engine",
          where(), engine_->name(), std::chrono::duration<double>(timeout_).count()));
    }
    result = worker_->result;
    if (worker_->error) {
      try {
        std::rethrow_exception(worker_->error);
      } catch (const ReplicaStopped&) {
        throw;  // a peer's failure reached the transport: the peer's error is the cause
      } catch (const Error& e) {
        throw Error(e.exit_code(), fmt::format("{}: collective engine '{}' failed: {}", where(),
                                               engine_->name(), e.what()));
      } catch (const std::exception& e) {
        throw RuntimeFailure(fmt::format("{}: collective engine '{}' failed: {}", where(),
                                         engine_->name(), e.what()));
      }
    }
  }
  if (result == CollectiveResult::refused) {
    ++counts_.refused;
    fallback();
    return;
  }
  ++counts_.run;
  if (const auto seconds = engine_->estimate_seconds(call)) {
    counts_.modelled_seconds += *seconds;
    counts_.modelled = true;
  }
}

namespace {

CollectiveCall make_call(CollectiveOp op, const void* send, void* recv, std::size_t count,
                         DType type) {
  CollectiveCall call;
  call.op = op;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.type = type;
  return call;
}

}  // namespace

void EngineCommunicator::all_reduce(void* data, std::size_t count, DType type, ReduceOp op) {
  CollectiveCall call = make_call(CollectiveOp::all_reduce, data, data, count, type);
  call.reduce = op;
  offer(std::move(call), [&] { transport_.all_reduce(data, count, type, op); });
}

void EngineCommunicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                        DType type, ReduceOp op) {
  CollectiveCall call = make_call(CollectiveOp::reduce_scatter, send, recv, recv_count, type);
  call.reduce = op;
  offer(std::move(call), [&] { transport_.reduce_scatter(send, recv, recv_count, type, op); });
}

void EngineCommunicator::all_gather(const void* send, void* recv, std::size_t send_count,
                                    DType type) {
  offer(make_call(CollectiveOp::all_gather, send, recv, send_count, type),
        [&] { transport_.all_gather(send, recv, send_count, type); });
}

void EngineCommunicator::broadcast(void* data, std::size_t count, DType type, int root) {
  CollectiveCall call = make_call(CollectiveOp::broadcast, data, data, count, type);
  call.root = root;
  offer(std::move(call), [&] { transport_.broadcast(data, count, type, root); });
}

void EngineCommunicator::barrier() {
  offer(make_call(CollectiveOp::barrier, nullptr, nullptr, 0, DType::f32),
        [&] { transport_.barrier(); });
}

}  // namespace polyhal
