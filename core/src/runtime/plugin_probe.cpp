// Loading plugins in child processes, so that no plugin's code runs in the
// process that lists them: a plugin that crashes (a corrupt .so mapped past
// its end gives SIGBUS), hangs or throws while loading is reported, and the
// others keep working.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/error.hpp"
#include "util/child_process.hpp"

namespace polyhal {
namespace {

/// The most a child may report: a device table is a few KiB.
constexpr std::size_t kMaxReportBytes = 4 << 20;

/// Runs in the child: load, call back, and report as one JSON object.
std::string load_and_report(PluginCandidate candidate, const std::filesystem::path& search_dir,
                            bool allow_writable, const ProbeCallback& in_child) {
  nlohmann::json report;
  try {
    auto backend = PluginLoader::load_file(candidate.path, allow_writable, &candidate, search_dir);
    if (in_child) {
      try {
        report["output"] = in_child(*backend);
      } catch (const Error& e) {
        report["error_exit_code"] = static_cast<int>(e.exit_code());
        report["error"] = e.what();
      } catch (const std::exception& e) {
        report["error_exit_code"] = static_cast<int>(ExitCode::failure);
        report["error"] = e.what();
      } catch (...) {
        report["error_exit_code"] = static_cast<int>(ExitCode::failure);
        report["error"] =
            fmt::format("plugin '{}' threw an exception of unknown type", candidate.name);
      }
    }
  } catch (const std::exception&) {
    // load_file filled in the refusal.
  } catch (...) {
    candidate.status = PluginCandidate::Status::rejected;
    candidate.reason = "loading threw an exception of unknown type (not a std::exception)";
  }
  report["status"] = static_cast<int>(candidate.status);
  report["reason"] = candidate.reason;
  report["name"] = candidate.name;
  report["version"] = candidate.version;
  report["abi"] = candidate.abi;
  report["summary"] = candidate.summary;
  return report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ProbedPlugin probe_one(PluginCandidate candidate, const std::filesystem::path& search_dir,
                       const PluginSearchOptions& options, const ProbeCallback& in_child,
                       std::chrono::seconds timeout) {
  const auto outcome = detail::run_in_child(
      [&] {
        return load_and_report(candidate, search_dir, options.allow_world_writable, in_child);
      },
      timeout, kMaxReportBytes);
  ProbedPlugin probed;
  probed.candidate = std::move(candidate);
  PluginCandidate& c = probed.candidate;
  auto crashed = [&](const std::string& how) {
    c.status = PluginCandidate::Status::crashed;
    c.reason = how;
    return probed;
  };
  if (!outcome.finished) {
    return crashed(
        fmt::format("did not finish loading within {} s and was stopped: the plugin "
                    "hangs while loading",
                    timeout.count()));
  }
  if (outcome.signal != 0) {
    return crashed(
        fmt::format("crashed while loading: {}: the file is corrupt or the plugin "
                    "faulty; reinstall its package",
                    detail::signal_text(outcome.signal)));
  }
  const auto report = nlohmann::json::parse(outcome.report, nullptr, /*allow_exceptions=*/false);
  if (!outcome.reported() || !report.is_object()) {
    return crashed(fmt::format("crashed while loading: exited with status {} without a report",
                               outcome.exit_status));
  }
  const int reported = report.value("status", -1);
  if (reported != static_cast<int>(PluginCandidate::Status::loaded) &&
      reported != static_cast<int>(PluginCandidate::Status::rejected)) {
    return crashed("crashed while loading: its report is not one a loader writes");
  }
  c.status = static_cast<PluginCandidate::Status>(reported);
  c.reason = report.value("reason", "");
  c.name = report.value("name", c.name);
  c.version = report.value("version", "");
  c.abi = report.value("abi", "");
  c.summary = report.value("summary", "");
  probed.output = report.value("output", "");
  if (report.contains("error_exit_code")) {
    probed.error_exit_code = report.value("error_exit_code", 1);
    probed.error = report.value("error", "");
  }
  return probed;
}

}  // namespace

std::vector<ProbedPlugin> probe_plugins(const PluginSearchOptions& options,
                                        const ProbeCallback& in_child,
                                        std::chrono::seconds timeout) {
  std::vector<ProbedPlugin> probed;
  for (auto& [candidate, search_dir] : detail::find_plugin_files(options)) {
    if (!detail::pending(candidate)) {
      probed.push_back({std::move(candidate), {}, {}, {}});
      continue;
    }
    probed.push_back(probe_one(std::move(candidate), search_dir, options, in_child, timeout));
  }
  return probed;
}

}  // namespace polyhal
