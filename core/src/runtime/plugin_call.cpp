#include "runtime/plugin_call.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace polyhal::detail {
namespace {

/// Plugin calls in progress (on any thread) and the message of the latest:
/// the one piece of state the exit handlers can reach.
std::atomic<int> g_calls_in_progress{0};
std::mutex g_message_mutex;
std::string g_message;

void report_plugin_exit() {
  if (g_calls_in_progress.load() == 0) return;
  std::string text =
      "polyhal: error: a plugin ended the process itself (exit() inside the plugin, not an "
      "exception); exit 1\n";
  if (g_message_mutex.try_lock()) {
    text = g_message;
    g_message_mutex.unlock();
  }
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, text.data(), text.size());
  ::_exit(1);  // exit handlers may not call exit(); the status is ours, not the plugin's
}

void install_exit_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit(report_plugin_exit);
    std::at_quick_exit(report_plugin_exit);
  });
}

/// The shared library that holds `object`'s class (its vtable), if known.
std::string library_of(const void* object) {
  if (object == nullptr) return "";
  Dl_info info{};
  const void* vtable = *static_cast<const void* const*>(object);
  if (::dladdr(vtable, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

}  // namespace

PluginExitGuard::PluginExitGuard(const std::string& what, const void* object) {
  install_exit_handlers();
  const std::string file = library_of(object);
  {
    const std::lock_guard<std::mutex> lock(g_message_mutex);
    g_message = fmt::format(
        "polyhal: error: {}: the plugin{} ended the process itself (exit() inside the plugin, "
        "not an exception): a fault of the plugin; exit 1\n",
        what, file.empty() ? "" : " " + file);
  }
  ++g_calls_in_progress;
}

PluginExitGuard::~PluginExitGuard() {
  --g_calls_in_progress;
}

}  // namespace polyhal::detail
