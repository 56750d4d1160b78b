// polyhal: the launcher. Parses the command line, then hands off to commands.cpp.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include "cli.hpp"
#include "command_table.hpp"
#include "commands.hpp"
#include "polyhal/abi.hpp"
#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/error.hpp"
#include "polyhal/op_schema.hpp"

namespace {

std::filesystem::path executable_dir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path{} : self.parent_path();
}

/// The shell's completion: the installed backends by their files' names
/// (completion loads no plugin).
int complete(int argc, char** argv) {
  polyhal::PluginSearchOptions search;
  search.executable_dir = executable_dir();
  std::set<std::string> backends;
  for (const auto& found : polyhal::detail::find_plugin_files(search))
    backends.insert(found.first.name);
  std::cout << polyhal::completion_candidates(
      std::vector<std::string>(argv + 2, argv + argc),
      std::vector<std::string>(backends.begin(), backends.end()));
  return 0;
}

/// Logs go to stderr with a timestamp; results and summaries to stdout, so
/// `polyhal run ... > results.txt` keeps them apart.
void start_logging(const polyhal::CommandLine& cl) {
  auto level = spdlog::level::from_str(cl.log_level);
  if (level == spdlog::level::off && cl.log_level != "off") {
    throw polyhal::UsageError(
        fmt::format("--log-level: unknown level '{}'; use trace, debug, info, warn, error or off",
                    cl.log_level));
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("polyhal"));
  spdlog::set_level(level);
  spdlog::set_pattern(polyhal::kLogPattern);
}

int dispatch(int argc, char** argv) {
  using namespace polyhal;
  if (argc > 1 && std::string_view(argv[1]) == "__complete") return complete(argc, argv);
  CommandLine cl = parse_command_line(argc, argv);
  if (cl.version) {
    std::cout << fmt::format("polyhal {} (plugin ABI {}.{}, op schema {})\n", POLYHAL_VERSION,
                             kAbiMajor, kAbiMinor, kOpSchemaVersion);
    return 0;
  }
  if (cl.help) {
    std::cout << (cl.help_topic.empty() ? overview_help() : command_help(cl.help_topic));
    return 0;
  }
  start_logging(cl);
  cl.common.executable_dir = executable_dir();
  cl.common.log_level_given = cl.log_level_given;
  if (cl.backend) cl.run.backend = cl.backend;
  if (cl.command.empty()) throw UsageError(fmt::format("no command given\n{}", overview_help()));
  for (const CommandRow& row : command_table())
    if (row.name == cl.command) return row.run(cl, argc, argv);
  throw Error(ExitCode::failure,
              fmt::format("command '{}' is parsed but has no row in the command table "
                          "(launcher/command_table.cpp)",
                          cl.command));
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP threads that wait for each other spin briefly, then sleep,
  // unless the user chose a policy: libgomp's default spin (300000 rounds)
  // beside other work on the host collapses a run (a waiting thread spins
  // while the one it waits for is descheduled), and sleeping at once costs
  // up to a fifth on an idle host; 1000 rounds keep both within 10% of the
  // best (bench/shared_host.py). Set before any plugin loads libgomp, which
  // reads it once.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr)
    ::setenv("GOMP_SPINCOUNT", "1000", 0);
  try {
    return dispatch(argc, argv);
  } catch (const polyhal::Error& e) {
    std::cerr << "polyhal: error: " << e.what() << '\n';
    return static_cast<int>(e.exit_code());
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be followed (a loop of symbolic
    // links, a missing or unreadable part) is bad input: its path and the
    // reason in words, exit 2; other file system failures (a full disk) exit 1.
    const int code = e.code().value();
    const bool input = code == ELOOP || code == ENOENT || code == ENOTDIR || code == ENAMETOOLONG ||
                       code == EACCES;
    std::cerr << "polyhal: error: " << (e.path1().empty() ? "" : e.path1().string() + ": ")
              << (code == ELOOP ? std::string("a loop of symbolic links (each names the next)")
                                : e.code().message())
              << '\n';
    return static_cast<int>(input ? polyhal::ExitCode::bad_input : polyhal::ExitCode::failure);
  } catch (const std::exception& e) {
    std::cerr << "polyhal: error: " << e.what() << '\n';
    return static_cast<int>(polyhal::ExitCode::failure);
  } catch (...) {  // e.g. a plugin throwing something that is not a std::exception
    std::cerr << "polyhal: error: an exception of unknown type (not derived from "
                 "std::exception) reached the launcher\n";
    return static_cast<int>(polyhal::ExitCode::failure);
  }
}
