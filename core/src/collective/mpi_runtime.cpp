// MpiRuntime in libpolyhal: the environment check, and everything else
// through the MPI module, loaded here on first use.
#include "collective/mpi_module.hpp"
#include "polyhal/app/mpi_collective.hpp"
#include "runtime/core_module.hpp"

#include <cstdlib>

namespace polyhal {

const detail::MpiModule& detail::mpi_module() {
  return *static_cast<const MpiModule*>(load_core_module(
      {"mpi", "running as MPI ranks (collective: mpi, or under mpirun)", "POLYHAL_MODULE_MPI"}));
}

MpiRuntime::MpiRuntime() : session_(detail::mpi_module().start()) {}

MpiRuntime::~MpiRuntime() = default;

int MpiRuntime::rank() const noexcept {
  return session_->rank();
}
int MpiRuntime::size() const noexcept {
  return session_->size();
}
bool MpiRuntime::thread_multiple() const noexcept {
  return session_->thread_multiple();
}
int MpiRuntime::ranks_on_this_host() const noexcept {
  return session_->ranks_on_this_host();
}

void MpiRuntime::abort(int exit_code) const {
  session_->abort(exit_code);
  std::_Exit(exit_code);  // not reached: the module's abort does not return
}

bool MpiRuntime::launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

std::unique_ptr<Communicator> make_mpi_communicator(const MpiRuntime& runtime,
                                                    std::chrono::milliseconds timeout) {
  return runtime.session().make_communicator(timeout);
}

}  // namespace polyhal
