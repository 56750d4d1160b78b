#include "data/hdf5_vetting.hpp"

#include <fmt/format.h>

#include "polyhal/error.hpp"
#include "util/child_process.hpp"

namespace polyhal::detail {
namespace {

/// A file of a few hundred MB reads in seconds; a crafted one may loop.
constexpr std::chrono::seconds kVetTimeout{300};
constexpr std::string_view kOk = "ok";
constexpr std::string_view kError = "error:";

}  // namespace

void vet_hdf5_in_child(const std::filesystem::path& file, const std::function<void()>& parse) {
  const ChildOutcome outcome = run_in_child(
      [&]() -> std::string {
        try {
          parse();
          return std::string(kOk);
        } catch (const std::exception& e) {
          return std::string(kError) + e.what();
        }
      },
      kVetTimeout, 1 << 16);
  if (!outcome.finished) {
    throw ConfigError(fmt::format(
        "{}: libhdf5 did not finish reading this file within {} s and was stopped (a crafted file "
        "can make it loop): refused",
        file.string(), kVetTimeout.count()));
  }
  if (outcome.signal != 0) {
    throw ConfigError(fmt::format(
        "{}: libhdf5 crashed reading this file ({}): it is corrupt or crafted (polyhal parses "
        "HDF5 data in a child process first, so nothing else was affected)",
        file.string(), signal_text(outcome.signal)));
  }
  if (outcome.report.starts_with(kError)) throw ConfigError(outcome.report.substr(kError.size()));
  if (outcome.report != kOk) {
    throw ConfigError(
        fmt::format("{}: reading this file failed in a child process (exit status "
                    "{}): it is corrupt or crafted",
                    file.string(), outcome.exit_status));
  }
}

}  // namespace polyhal::detail
