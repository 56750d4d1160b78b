#include "polyhal/error.hpp"

#include <fmt/format.h>

// Out-of-line destructors give each exception one typeinfo in libpolyhal, so
// a plugin's throw is caught by the launcher's catch.
namespace polyhal {

Error::Error(ExitCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}
Error::~Error() = default;
ConfigError::ConfigError(const std::string& m) : Error(ExitCode::bad_input, m) {}
ConfigError::~ConfigError() = default;
UsageError::UsageError(const std::string& m) : Error(ExitCode::bad_input, m) {}
UsageError::~UsageError() = default;
PluginError::PluginError(const std::string& m) : Error(ExitCode::unavailable, m) {}
PluginError::~PluginError() = default;
DeviceUnavailableError::DeviceUnavailableError(const std::string& m)
    : Error(ExitCode::unavailable, m) {}
DeviceUnavailableError::~DeviceUnavailableError() = default;
KernelNotFoundError::KernelNotFoundError(const std::string& m) : Error(ExitCode::bad_input, m) {}
KernelNotFoundError::~KernelNotFoundError() = default;
OutOfDeviceMemoryError::OutOfDeviceMemoryError(const std::string& m)
    : Error(ExitCode::failure, m) {}
OutOfDeviceMemoryError::~OutOfDeviceMemoryError() = default;
RuntimeFailure::RuntimeFailure(const std::string& m) : Error(ExitCode::failure, m) {}
RuntimeFailure::~RuntimeFailure() = default;
ReplicaStopped::ReplicaStopped(int rank, int failed_rank)
    : RuntimeFailure(
          fmt::format("replica {}: replica {} failed; stopping with it", rank, failed_rank)),
      failed_rank_(failed_rank) {}
ReplicaStopped::~ReplicaStopped() = default;

}  // namespace polyhal
