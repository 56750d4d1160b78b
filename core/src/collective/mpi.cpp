#include "polyhal/mpi_collective.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <cstdlib>
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

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(const MpiRuntime& runtime, std::chrono::milliseconds timeout)
      : rank_(runtime.rank()), size_(runtime.size()), timeout_(timeout) {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  }
  ~MpiCommunicator() override {
    if (!abandoned_) MPI_Comm_free(&comm_);
  }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }

  void all_reduce(void* data, std::size_t count, DType type, ReduceOp op) override {
    detail::require_reducible(type);
    float* values = as_f32(data, count, type, scratch_);
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, values, int_count(count), MPI_FLOAT, mpi_op(op), comm_,
                         &request),
          "MPI_Iallreduce");
    wait(request,
         fmt::format("all_reduce({} x {}, {})", count, dtype_name(type), reduce_op_name(op)));
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
    MPI_Request request;
    check(MPI_Ireduce_scatter_block(in, out, int_count(recv_count), MPI_FLOAT, mpi_op(op), comm_,
                                    &request),
          "MPI_Ireduce_scatter_block");
    wait(request, fmt::format("reduce_scatter({} x {} per rank)", recv_count, dtype_name(type)));
    finish(out, recv, recv_count, type, op);
  }

  void all_gather(const void* send, void* recv, std::size_t send_count, DType type) override {
    MPI_Request request;
    check(MPI_Iallgather(send, int_count(send_count * dtype_size(type)), MPI_BYTE, recv,
                         int_count(send_count * dtype_size(type)), MPI_BYTE, comm_, &request),
          "MPI_Iallgather");
    wait(request, fmt::format("all_gather({} x {} per rank)", send_count, dtype_name(type)));
  }

  void broadcast(void* data, std::size_t count, DType type, int root) override {
    if (root < 0 || root >= size_)
      throw RuntimeFailure(fmt::format("broadcast from rank {} in a {}-rank group", root, size_));
    MPI_Request request;
    check(MPI_Ibcast(data, int_count(count * dtype_size(type)), MPI_BYTE, root, comm_, &request),
          "MPI_Ibcast");
    wait(request, fmt::format("broadcast({} x {} from rank {})", count, dtype_name(type), root));
  }

  void barrier() override {
    MPI_Request request;
    check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
    wait(request, "barrier");
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

  /// Polls `request` until done or the deadline, sleeping briefly between
  /// polls once the operation has taken a while (Open MPI progresses
  /// non-blocking collectives inside MPI_Test).
  void wait(MPI_Request& request, const std::string& what) {
    const auto start = std::chrono::steady_clock::now();
    for (long polls = 0;; ++polls) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited > timeout_) {
        abandoned_ = true;  // the request can never complete; do not free the communicator
        throw CollectiveTimeout(fmt::format(
            "rank {} of {}: {} did not complete within {:.1f} s: another rank died, hangs or "
            "never reached this collective (collective.timeout_seconds)",
            rank_, size_, what, std::chrono::duration<double>(timeout_).count()));
      }
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool abandoned_ = false;
  std::vector<float> scratch_, recv_scratch_;
};

}  // namespace

MpiRuntime::MpiRuntime() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw RuntimeFailure("MPI is already initialised in this process");
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiRuntime::~MpiRuntime() {
  MPI_Finalize();
}

void MpiRuntime::abort(int exit_code) const {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

bool MpiRuntime::launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

std::unique_ptr<Communicator> make_mpi_communicator(const MpiRuntime& runtime,
                                                    std::chrono::milliseconds timeout) {
  return std::make_unique<MpiCommunicator>(runtime, timeout);
}

}  // namespace polyhal
