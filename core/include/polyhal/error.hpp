#pragma once
/// @file error.hpp
/// The exceptions polyhal throws and the launcher's exit codes.
///
/// Every error is a polyhal::Error carrying the exit code the launcher uses
/// (DESIGN.md: 0 ok, 2 bad usage or config, 3 plugin or device unavailable,
/// 1 failure while running). Messages are for a person: they say what went
/// wrong and where (file:line, key, plugin path) and, where we know, what to do.
#include <stdexcept>
#include <string>

namespace polyhal {

/// Launcher exit codes; part of the documented command-line contract.
/// Process exit codes (docs/config.md): 4 = a replica was lost (another rank
/// died or did not arrive at a collective within collective.timeout).
enum class ExitCode : int { ok = 0, failure = 1, bad_input = 2, unavailable = 3, lost_rank = 4 };

/// Base of every polyhal exception.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message);
  ~Error() override;
  ExitCode exit_code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

/// A config file or --set value is wrong. The message starts with
/// "file:line: key 'a.b': ..." (or "--set a.b=v: ...").
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message);
  ~ConfigError() override;
};

/// The command line itself is wrong (unknown command, missing option).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message);
  ~UsageError() override;
};

/// A plugin could not be found or loaded, or a backend is not installed.
class PluginError : public Error {
 public:
  explicit PluginError(const std::string& message);
  ~PluginError() override;
};

/// A device exists in principle but cannot be used (no such index, hardware
/// mode asked of a device model without its vendor runtime, ISA cap above the CPU).
class DeviceUnavailableError : public Error {
 public:
  explicit DeviceUnavailableError(const std::string& message);
  ~DeviceUnavailableError() override;
};

/// The workload asks for an operation or dtype the device has no kernel for.
/// Thrown at prepare time, never mid-run. Counts as bad input: the config
/// asked for something this backend cannot do.
class KernelNotFoundError : public Error {
 public:
  explicit KernelNotFoundError(const std::string& message);
  ~KernelNotFoundError() override;
};

/// An allocation would exceed the device's memory capacity.
class OutOfDeviceMemoryError : public Error {
 public:
  explicit OutOfDeviceMemoryError(const std::string& message);
  ~OutOfDeviceMemoryError() override;
};

/// Anything else that fails while a workload runs.
/// A collective did not complete within its timeout: a rank died, hangs, or
/// never called it.
class CollectiveTimeout : public Error {
 public:
  explicit CollectiveTimeout(const std::string& message) : Error(ExitCode::lost_rank, message) {}
};

class RuntimeFailure : public Error {
 public:
  explicit RuntimeFailure(const std::string& message);
  ~RuntimeFailure() override;
};

/// A replica stopped because another replica of its group failed first:
/// a consequence, never the cause (ReplicaGroup reports the cause).
class ReplicaStopped : public RuntimeFailure {
 public:
  ReplicaStopped(int rank, int failed_rank);
  ~ReplicaStopped() override;
  int failed_rank() const noexcept { return failed_rank_; }

 private:
  int failed_rank_;
};

}  // namespace polyhal
