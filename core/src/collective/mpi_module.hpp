#pragma once
// What polyhal's MPI module (core/modules/mpi, libpolyhal-mpi.so) provides
// (inside libpolyhal, not installed): Open MPI is linked by the module only,
// so a process that never runs as an MPI rank never loads it.
#include <chrono>
#include <memory>

#include "polyhal/collective.hpp"

namespace polyhal::detail {

/// MPI_Init_thread .. MPI_Finalize of this process.
class MpiSession {
 public:
  virtual ~MpiSession() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual int ranks_on_this_host() const noexcept = 0;
  virtual bool thread_multiple() const noexcept = 0;
  [[noreturn]] virtual void abort(int exit_code) const = 0;
  /// A communicator over a duplicate of MPI_COMM_WORLD (see mpi_collective.hpp).
  virtual std::unique_ptr<Communicator> make_communicator(
      std::chrono::milliseconds timeout) const = 0;
};

class MpiModule {
 public:
  virtual ~MpiModule() = default;
  /// Initialises MPI; throws RuntimeFailure when it is already initialised.
  virtual std::unique_ptr<MpiSession> start() const = 0;
};

/// The loaded module (load_core_module): throws PluginError without it.
const MpiModule& mpi_module();

}  // namespace polyhal::detail
