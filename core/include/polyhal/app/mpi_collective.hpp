#pragma once
/// @file mpi_collective.hpp
/// The Communicator over Open MPI: one rank per process, started by
/// `mpirun -np N polyhal run ...` (docs/scale-out.md). Every collective runs
/// under a watchdog thread: if a rank died, hangs or never calls the
/// collective, the others report which collective timed out and end the job
/// with exit code 4 (CollectiveTimeout's) instead of hanging.
#include <chrono>
#include <memory>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/collective.hpp"

namespace polyhal {
namespace detail {
class MpiSession;
}

/// MPI_Init_thread / MPI_Finalize for the process; at most one at a time.
/// Open MPI comes with polyhal's MPI module (package polyhal-module-mpi),
/// loaded here: without it this throws PluginError naming the package.
class MpiRuntime {
 public:
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const noexcept;
  int size() const noexcept;
  /// MPI granted MPI_THREAD_MULTIPLE (the collective watchdog can then abort the job).
  bool thread_multiple() const noexcept;
  /// The ranks on this rank's host (MPI_COMM_TYPE_SHARED); fewer than
  /// size() when the job spans several hosts.
  int ranks_on_this_host() const noexcept;
  /// Tears down every rank of the job (MPI_Abort) with `exit_code`: what a
  /// rank does after it gave up on a lost peer, so no rank is left waiting.
  [[noreturn]] void abort(int exit_code) const;
  /// True when this process was started by mpirun/mpiexec (OMPI_* or PMI_*
  /// in the environment): `collective: mpi` without it runs one rank.
  static bool launched_by_mpirun();
  /// The module's session (make_mpi_communicator).
  const detail::MpiSession& session() const noexcept { return *session_; }

 private:
  std::unique_ptr<detail::MpiSession> session_;
};

/// The communicator of MPI_COMM_WORLD (duplicated, so polyhal's traffic
/// never matches a user's). `timeout`: the longest any one collective may
/// take before CollectiveTimeout names the operation and the ranks missing.
std::unique_ptr<Communicator> make_mpi_communicator(const MpiRuntime& runtime,
                                                    std::chrono::milliseconds timeout);

}  // namespace polyhal
