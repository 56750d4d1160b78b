// polyhal's MPI module: Open MPI's communicator and the process's MPI
// session, behind collective/mpi_module.hpp.
#include "collective/mpi_module.hpp"

#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stop_token>
#include <string_view>
#include <thread>
#include <vector>

#include "collective/reduction.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// f32 values to reduce and MPI's op for them (mean is a sum, divided after).
MPI_Op mpi_op(ReduceOp op) {
  return op == ReduceOp::max ? MPI_MAX : MPI_SUM;
}

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw RuntimeFailure(fmt::format("{} failed: {}", call, std::string(text, length)));
}

/// Largest all-reduce handed to MPI at once (f32 elements: 16 MiB).
constexpr std::size_t kPiece = std::size_t{4} << 20;

/// How long a rank whose collective timed out waits for MPI_Abort to end the
/// job before it exits by itself: MPI_Abort never returns when mpirun cannot
/// reach a lost host's daemon (a link down), and the survivors must stop.
constexpr std::chrono::seconds kAbortGrace{5};

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "an unnamed host";
  return name;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(const detail::MpiSession& runtime, std::chrono::milliseconds timeout)
      : rank_(runtime.rank()),
        size_(runtime.size()),
        timeout_(timeout),
        multiple_threads_(runtime.thread_multiple()),
        host_(host_name()) {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  }
  ~MpiCommunicator() override {
    watchdog_.request_stop();
    watchdog_.join();
    MPI_Comm_free(&comm_);
  }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }

  void all_reduce(void* data, std::size_t count, DType type, ReduceOp op) override {
    detail::require_reducible(type);
    float* values = as_f32(data, count, type, scratch_);
    guarded(fmt::format("all_reduce({} x {}, {})", count, dtype_name(type), reduce_op_name(op)),
            [&] {
              // In pieces: Open MPI 4.1's shared-memory all-reduce falls from
              // ~7 GB/s at 16 MiB to ~0.4 GB/s at 64 MiB and above on one host
              // (bench/allreduce.sh); pieces keep it on the fast side.
              for (std::size_t begin = 0; begin < count; begin += kPiece) {
                const std::size_t n = std::min(kPiece, count - begin);
                check(MPI_Allreduce(MPI_IN_PLACE, values + begin, int_count(n), MPI_FLOAT,
                                    mpi_op(op), comm_),
                      "MPI_Allreduce");
              }
            });
    finish(values, data, count, type, op);
  }

  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                      ReduceOp op) override {
    detail::require_reducible(type);
    const std::size_t total = recv_count * static_cast<std::size_t>(size_);
    const float* in =
        type == DType::f32 ? static_cast<const float*>(send) : as_f32(send, total, type, scratch_);
    float* out = type == DType::f32 ? static_cast<float*>(recv)
                                    : (recv_scratch_.resize(recv_count), recv_scratch_.data());
    guarded(fmt::format("reduce_scatter({} x {} per rank)", recv_count, dtype_name(type)), [&] {
      check(MPI_Reduce_scatter_block(in, out, int_count(recv_count), MPI_FLOAT, mpi_op(op), comm_),
            "MPI_Reduce_scatter_block");
    });
    finish(out, recv, recv_count, type, op);
  }

  void all_gather(const void* send, void* recv, std::size_t send_count, DType type) override {
    guarded(fmt::format("all_gather({} x {} per rank)", send_count, dtype_name(type)), [&] {
      check(MPI_Allgather(send, int_count(send_count * dtype_size(type)), MPI_BYTE, recv,
                          int_count(send_count * dtype_size(type)), MPI_BYTE, comm_),
            "MPI_Allgather");
    });
  }

  void broadcast(void* data, std::size_t count, DType type, int root) override {
    if (root < 0 || root >= size_)
      throw RuntimeFailure(fmt::format("broadcast from rank {} in a {}-rank group", root, size_));
    guarded(fmt::format("broadcast({} x {} from rank {})", count, dtype_name(type), root), [&] {
      check(MPI_Bcast(data, int_count(count * dtype_size(type)), MPI_BYTE, root, comm_),
            "MPI_Bcast");
    });
  }

  void barrier() override {
    guarded("barrier", [&] { check(MPI_Barrier(comm_), "MPI_Barrier"); });
  }

 private:
  static int int_count(std::size_t count) {
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw RuntimeFailure(fmt::format("MPI collective of {} elements: more than 2^31-1", count));
    return static_cast<int>(count);
  }

  /// f32 data itself, or f16/bf16 widened into `scratch` (reduced in f32).
  static float* as_f32(const void* data, std::size_t count, DType type,
                       std::vector<float>& scratch) {
    if (type == DType::f32) return static_cast<float*>(const_cast<void*>(data));
    scratch.resize(count);
    detail::load_f32(data, type, 0, count, scratch.data());
    return scratch.data();
  }

  /// Mean divides the sum; f16/bf16 round once, at the end.
  void finish(float* values, void* out, std::size_t count, DType type, ReduceOp op) const {
    if (op == ReduceOp::mean) {
      const float inv = 1.0f / static_cast<float>(size_);
      for (std::size_t i = 0; i < count; ++i) values[i] *= inv;
    }
    if (type != DType::f32) detail::store_f32(values, out, type, 0, count);
  }

  /// Runs the blocking collective `call` under the watchdog: if it has not
  /// returned within the timeout, the watchdog thread reports `what`, the
  /// call's number and context() and ends the job (MPI_Abort, exit code 4;
  /// this rank exits by itself kAbortGrace later if MPI_Abort hangs): a
  /// blocked MPI call cannot be interrupted, and the peers are torn down
  /// with this rank either way.
  /// Blocking collectives, not polled non-blocking ones: Open MPI's blocking
  /// algorithms are many times faster for large messages (bench/allreduce.sh).
  template <class Call>
  void guarded(const std::string& what, Call call) {
    {
      std::lock_guard lock(mutex_);
      ++calls_;
      const std::string where = context();
      // Every rank numbers its collectives alike: the same number on two
      // ranks' messages is the same call.
      what_ = fmt::format("collective #{} {}{}", calls_, what, where.empty() ? "" : " at " + where);
      deadline_ = std::chrono::steady_clock::now() + timeout_;
      armed_ = true;
    }
    armed_changed_.notify_one();
    call();
    {
      std::lock_guard lock(mutex_);
      armed_ = false;
    }
    armed_changed_.notify_one();
  }

  void watch(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      if (!armed_) {
        armed_changed_.wait(lock, stop, [&] { return armed_; });
        continue;
      }
      if (armed_changed_.wait_until(lock, stop, deadline_, [&] { return !armed_; })) continue;
      if (stop.stop_requested()) return;
      const CollectiveTimeout error(fmt::format(
          "rank {} of {} on {} (pid {}): {} did not complete within {:.1f} s: another rank "
          "died, hangs, lost its network or never reached this collective "
          "(collective.timeout_seconds); ending the job",
          rank_, size_, host_, getpid(), what_, std::chrono::duration<double>(timeout_).count()));
      std::fprintf(stderr, "polyhal: error: %s\n", error.what());
      std::fflush(stderr);
      const int code = static_cast<int>(error.exit_code());
      std::thread([code] {
        std::this_thread::sleep_for(kAbortGrace);
        std::_Exit(code);
      }).detach();
      if (multiple_threads_) MPI_Abort(MPI_COMM_WORLD, code);
      std::_Exit(code);
    }
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  bool multiple_threads_;  // MPI_Abort may be called from the watchdog thread
  std::string host_;
  std::uint64_t calls_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<float> scratch_, recv_scratch_;
  std::mutex mutex_;
  std::condition_variable_any armed_changed_;
  bool armed_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point deadline_;
  std::jthread watchdog_{[this](std::stop_token stop) { watch(stop); }};
};

class OpenMpiSession final : public detail::MpiSession {
 public:
  OpenMpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) throw RuntimeFailure("MPI is already initialised in this process");
    int provided = 0;
    // MULTIPLE so the collective watchdog may call MPI_Abort while the main
    // thread is blocked in a collective; without it the watchdog only exits.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm host = MPI_COMM_NULL;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host),
          "MPI_Comm_split_type");
    MPI_Comm_size(host, &local_size_);
    MPI_Comm_free(&host);
  }
  ~OpenMpiSession() override { MPI_Finalize(); }
  OpenMpiSession(const OpenMpiSession&) = delete;
  OpenMpiSession& operator=(const OpenMpiSession&) = delete;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int ranks_on_this_host() const noexcept override { return local_size_; }
  bool thread_multiple() const noexcept override { return thread_multiple_; }
  [[noreturn]] void abort(int exit_code) const override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }
  std::unique_ptr<Communicator> make_communicator(
      std::chrono::milliseconds timeout) const override {
    return std::make_unique<MpiCommunicator>(*this, timeout);
  }

 private:
  int rank_ = 0, size_ = 1, local_size_ = 1;
  bool thread_multiple_ = false;
};

class OpenMpiModule final : public detail::MpiModule {
 public:
  std::unique_ptr<detail::MpiSession> start() const override {
    return std::make_unique<OpenMpiSession>();
  }
};

}  // namespace
}  // namespace polyhal

extern "C" __attribute__((visibility("default"))) const void* polyhal_module_entry(
    const char* version) {
  static const polyhal::OpenMpiModule module;
  return std::string_view(version) == POLYHAL_VERSION ? &module : nullptr;
}
